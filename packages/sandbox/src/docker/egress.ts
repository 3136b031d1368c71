import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { networkInterfaces } from "node:os";
import type Docker from "dockerode";
import ipaddr from "ipaddr.js";

/**
 * The sandboxes' egress policy, as iptables rules on the engine's host: one chain of ours per
 * sandbox bridge for traffic it forwards (jumped to from DOCKER-USER, which Docker evaluates before
 * its own rules and never rewrites) and one for traffic to the host itself (jumped to from INPUT),
 * both only for packets that come in from that bridge.
 *
 * Whatever the mode, a sandbox never reaches the host (any of its addresses, any port), other
 * sandboxes, link-local addresses or private ranges, except what the policy names: the git hosts
 * (exactly their address and port), the DNS servers Docker's resolver forwards to (port 53), and
 * `allow` entries (never the host itself).
 */
type EgressMode = "none" | "public" | "allowlist";

export interface EgressService {
  address: string;
  /** TCP port. */
  port: number;
}

export interface EgressPolicy {
  /** none: only what is named below; public: also the public internet; allowlist: as none (the allow entries are the list). */
  mode: EgressMode;
  /** Reachable in every mode, even on a private range or on the host itself: the git hosts the clones come from. */
  services: EgressService[];
  /**
   * Port 53 (UDP and TCP) of these, in every mode. Docker's embedded resolver (127.0.0.11) forwards
   * a sandbox's queries to the engine's upstream servers from inside the sandbox's own network
   * namespace, so they cross the bridge like any other packet.
   */
  resolvers: string[];
  /** Addresses or CIDRs reachable in every mode, private ones included; never the host itself. */
  allow: string[];
  /** Networks the host is attached to: refused like the private ranges, whatever their addresses. */
  hostNetworks: string[];
}

/** Runs a command; never throws for a non-zero exit. */
export type CommandRunner = (
  cmd: string,
  args: string[],
  input?: string,
) => Promise<{ code: number; stdout: string; stderr: string }>;

class EgressPolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EgressPolicyError";
  }
}

type Family = 4 | 6;

/** Never a sandbox's to reach: private, shared, link-local, loopback, multicast and reserved ranges. */
const BLOCKED: Record<Family, string[]> = {
  4: [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
  ],
  6: ["::/128", "::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"],
};

/**
 * Refused, not dropped, so a sandbox's command fails at once instead of hanging: a TCP connect gets
 * a reset (an ICMP error would only surface after the first SYN retransmission, a second later).
 */
const REJECT: Record<Family, string[]> = {
  4: ["-p tcp -j REJECT --reject-with tcp-reset", "-j REJECT --reject-with icmp-admin-prohibited"],
  6: ["-p tcp -j REJECT --reject-with tcp-reset", "-j REJECT --reject-with icmp6-adm-prohibited"],
};

const tools = (family: Family) =>
  family === 4
    ? { iptables: "iptables", restore: "iptables-restore", bridgeNf: "bridge-nf-call-iptables" }
    : { iptables: "ip6tables", restore: "ip6tables-restore", bridgeNf: "bridge-nf-call-ip6tables" };

/** `a.b.c.d` or `a.b.c.d/n` (v4 or v6) as iptables prints it back: the network address and its length. */
export const canonicalCidr = (entry: string): { cidr: string; family: Family } => {
  const text = entry.trim();
  const [addr, bits] = text.includes("/") ? ipaddr.parseCIDR(text) : [ipaddr.parse(text), -1];
  if (addr.kind() === "ipv6" && (addr as ipaddr.IPv6).isIPv4MappedAddress()) {
    return canonicalCidr((addr as ipaddr.IPv6).toIPv4Address().toString() + (bits >= 0 ? `/${bits - 96}` : ""));
  }
  const family: Family = addr.kind() === "ipv4" ? 4 : 6;
  const len = bits >= 0 ? bits : family === 4 ? 32 : 128;
  if (family === 4) return { cidr: `${ipaddr.IPv4.networkAddressFromCIDR(`${addr}/${len}`)}/${len}`, family };
  const net = ipaddr.IPv6.networkAddressFromCIDR(`${(addr as ipaddr.IPv6).toNormalizedString()}/${len}`);
  return { cidr: `${net.toRFC5952String()}/${len}`, family };
};

const BRIDGE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

/** Our two chains for one bridge (iptables allows 28 characters; a bridge name has at most 15). */
export const egressChains = (bridge: string) => {
  if (!BRIDGE_NAME.test(bridge)) throw new EgressPolicyError(`not a bridge interface name: ${bridge}`);
  return { forward: `TERN-EGRESS-${bridge}`, input: `TERN-INPUT-${bridge}` };
};

const ofFamily = (entries: string[], family: Family): string[] => [
  ...new Set(entries.map(canonicalCidr).flatMap((c) => (c.family === family ? [c.cidr] : []))),
];

/** The rules of both chains for one address family, as `iptables -S` prints them (without `-N`). */
export const egressRules = (
  bridge: string,
  policy: EgressPolicy,
  family: Family,
): { forward: string[]; input: string[] } => {
  const chains = egressChains(bridge);
  const reject = REJECT[family];
  const opened: string[] = ["-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"];
  for (const s of policy.services) {
    const { cidr, family: f } = canonicalCidr(s.address);
    if (f === family) opened.push(`-d ${cidr} -p tcp -m tcp --dport ${s.port} -j RETURN`);
  }
  for (const cidr of ofFamily(policy.resolvers, family)) {
    opened.push(`-d ${cidr} -p udp -m udp --dport 53 -j RETURN`, `-d ${cidr} -p tcp -m tcp --dport 53 -j RETURN`);
  }
  const forward = [...opened, ...ofFamily(policy.allow, family).map((cidr) => `-d ${cidr} -j RETURN`)];
  if (policy.mode === "public") {
    const refused = new Set([...BLOCKED[family], ...ofFamily(policy.hostNetworks, family)]);
    forward.push(...[...refused].flatMap((cidr) => reject.map((r) => `-d ${cidr} ${r}`)));
  } else {
    forward.push(...reject);
  }
  // Whatever is addressed to the host itself arrives through INPUT, whichever of its addresses it names.
  const input = [...opened, ...reject];
  return {
    forward: forward.map((r) => `-A ${chains.forward} ${r}`),
    input: input.map((r) => `-A ${chains.input} ${r}`),
  };
};

const runCommand: CommandRunner = (cmd, args, input) =>
  new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d) => {
      stdout += d;
    });
    child.stderr?.on("data", (d) => {
      stderr += d;
    });
    child.on("error", (err) => resolve({ code: 127, stdout, stderr: `${stderr}${err.message}` }));
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    // A command that fails early closes its stdin: its exit code says what went wrong, not EPIPE.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(input);
  });

const lines = (text: string) => text.split("\n").filter(Boolean);

export interface ApplyEgressOptions {
  bridge: string;
  policy: EgressPolicy;
  /** Also the IPv6 rules (networks with IPv6 enabled; Docker turns IPv6 off inside the others' containers). */
  ipv6?: boolean;
  run?: CommandRunner;
}

/**
 * Installs the policy for one bridge, replacing whatever our chains held (one atomic
 * iptables-restore per family, so there is no moment without rules), then reads it back.
 * Idempotent; `replaced` says the chains held other rules before (another worker's settings).
 */
export const applyEgressPolicy = async (opts: ApplyEgressOptions): Promise<{ replaced: boolean }> => {
  const run = opts.run ?? runCommand;
  const chains = egressChains(opts.bridge);
  if (!existsSync(`/sys/class/net/${opts.bridge}`)) {
    throw new EgressPolicyError(
      `the sandbox bridge ${opts.bridge} is not on this host: the worker must run on its Docker engine's host to install egress rules`,
    );
  }
  let replaced = false;
  for (const family of opts.ipv6 ? ([4, 6] as const) : ([4] as const)) {
    const { iptables, restore, bridgeNf } = tools(family);
    const ipt = async (...args: string[]) => run(iptables, ["-w", ...args]);
    const must = async (...args: string[]) => {
      const r = await ipt(...args);
      if (r.code !== 0)
        throw new EgressPolicyError(`${iptables} ${args.join(" ")}: ${r.stderr.trim() || `exit ${r.code}`}`);
      return r;
    };

    // Traffic between two sandboxes of one bridge is bridged, not routed: iptables sees it only so.
    ensureSysctl(`/proc/sys/net/bridge/${bridgeNf}`);

    const rules = egressRules(opts.bridge, opts.policy, family);
    const before = await ipt("-S", chains.forward);
    const expected = [`-N ${chains.forward}`, ...rules.forward];
    if (before.code === 0 && lines(before.stdout).join("\n") !== expected.join("\n")) replaced = true;

    const restored = await run(
      restore,
      ["-w", "--noflush"],
      [
        "*filter",
        `:${chains.forward} - [0:0]`,
        `:${chains.input} - [0:0]`,
        ...rules.forward,
        ...rules.input,
        "COMMIT",
        "",
      ].join("\n"),
    );
    if (restored.code !== 0)
      throw new EgressPolicyError(`${restore}: ${restored.stderr.trim() || `exit ${restored.code}`}`);

    // Docker makes DOCKER-USER and jumps to it first from FORWARD; an engine without its own
    // iptables rules (--iptables=false) does not, and the chain is made here the same way.
    if ((await ipt("-S", "DOCKER-USER")).code !== 0) await must("-N", "DOCKER-USER");
    if ((await ipt("-C", "FORWARD", "-j", "DOCKER-USER")).code !== 0)
      await must("-I", "FORWARD", "1", "-j", "DOCKER-USER");
    await ensureSingleJump(ipt, must, "DOCKER-USER", ["-i", opts.bridge, "-j", chains.forward]);
    await ensureSingleJump(ipt, must, "INPUT", ["-i", opts.bridge, "-j", chains.input]);

    await verifyChain(ipt, chains.forward, rules.forward);
    await verifyChain(ipt, chains.input, rules.input);
  }
  return { replaced };
};

const ensureSysctl = (path: string) => {
  const read = () => (existsSync(path) ? readFileSync(path, "utf8").trim() : "");
  if (read() === "1") return;
  try {
    writeFileSync(path, "1");
  } catch {
    // Reported below.
  }
  if (read() !== "1") {
    throw new EgressPolicyError(
      `${path} is not 1 (is br_netfilter loaded?): traffic between sandboxes would pass unseen`,
    );
  }
};

type Ipt = (...args: string[]) => ReturnType<CommandRunner>;

/** Exactly one `-j` from `parent` to our chain, first in line; two workers starting at once may both add one. */
const ensureSingleJump = async (ipt: Ipt, must: Ipt, parent: string, rule: string[]) => {
  const text = `-A ${parent} ${rule.join(" ")}`;
  const count = lines((await must("-S", parent)).stdout).filter((l) => l === text).length;
  if (count === 0) await must("-I", parent, "1", ...rule);
  for (let extra = count - 1; extra > 0; extra--) await ipt("-D", parent, ...rule);
};

/** The chain holds exactly the rules meant; `-C` decides where the printed form differs (another iptables version). */
const verifyChain = async (ipt: Ipt, chain: string, rules: string[]) => {
  const listed = lines((await ipt("-S", chain)).stdout).filter((l) => l.startsWith("-A "));
  if (listed.join("\n") === rules.join("\n")) return;
  if (listed.length !== rules.length) {
    throw new EgressPolicyError(`chain ${chain} holds ${listed.length} rules after installing ${rules.length}`);
  }
  for (const rule of rules) {
    const args = rule.split(" ");
    args[0] = "-C";
    if ((await ipt(...args)).code !== 0) throw new EgressPolicyError(`chain ${chain} lacks: ${rule}`);
  }
};

/** Removes our chains of one bridge and the jumps to them (both families); for tests and operators. */
export const removeEgressPolicy = async (bridge: string, run: CommandRunner = runCommand): Promise<void> => {
  const chains = egressChains(bridge);
  for (const family of [4, 6] as const) {
    const { iptables } = tools(family);
    const ipt = (...args: string[]) => run(iptables, ["-w", ...args]);
    for (const [parent, chain] of [
      ["DOCKER-USER", chains.forward],
      ["INPUT", chains.input],
    ] as const) {
      for (let i = 0; i < 10 && (await ipt("-D", parent, "-i", bridge, "-j", chain)).code === 0; i++);
      if ((await ipt("-F", chain)).code === 0) await ipt("-X", chain);
    }
  }
};

export interface SandboxBridge {
  /** The network's bridge interface on the engine's host. */
  bridge: string;
  ipv6: boolean;
}

/** The bridge interface behind a Docker network: its own name option, else `br-` and the id's first 12 characters. */
export const sandboxBridgeOf = async (docker: Docker, network: string): Promise<SandboxBridge> => {
  const info = await docker.getNetwork(network).inspect();
  if (info.Driver !== "bridge")
    throw new EgressPolicyError(`network ${network} is not a bridge network (${info.Driver})`);
  const named = (info.Options as Record<string, string> | undefined)?.["com.docker.network.bridge.name"];
  return { bridge: named || `br-${String(info.Id).slice(0, 12)}`, ipv6: Boolean(info.EnableIPv6) };
};

/** The networks this host is attached to, from its interfaces' addresses (loopback left out). */
export const hostNetworks = (): string[] =>
  Object.values(networkInterfaces())
    .flat()
    .flatMap((a) => (a && !a.internal && a.cidr ? [canonicalCidr(a.cidr).cidr] : []));

/** The `nameserver`s of a resolv.conf that Docker forwards to from a sandbox (loopback ones it queries from the host). */
export const resolvConfNameservers = (text: string): string[] =>
  text
    .split("\n")
    .map((l) => l.trim().match(/^nameserver\s+(\S+)/)?.[1])
    .flatMap((ns) => {
      if (!ns || !ipaddr.isValid(ns.replace(/%.*$/, ""))) return [];
      const addr = ipaddr.process(ns.replace(/%.*$/, ""));
      return addr.range() === "loopback" ? [] : [addr.toString()];
    });

/** The host's resolvers (/etc/resolv.conf), which the engine's embedded DNS forwards to. */
export const hostResolvers = (path = "/etc/resolv.conf"): string[] =>
  existsSync(path) ? resolvConfNameservers(readFileSync(path, "utf8")) : [];
