import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { connect, createServer, type Server } from "node:net";
import { engineSandboxDriver, ensureTestEngine, waitFor } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  applyEgressPolicy,
  createDockerProbe,
  type DockerProbe,
  type EgressPolicy,
  hostNetworks,
  hostResolvers,
  removeEgressPolicy,
} from "../src/docker/index.ts";
import { type SandboxDriver, SandboxLabel, type SandboxSpec } from "../src/index.ts";

// An egress probe from inside sandboxes toward addresses of this machine only: the host (its
// bridge gateway and every other address it has), another sandbox, and a listener in a network
// namespace made here, reached through a veth pair that carries a private, a link-local and a
// documentation-range ("public") address. Nothing is ever sent off this machine: before any probe
// the routes to the namespace's addresses are checked to lead into the veth.

const NS = "tern-egress-probe";
const VETH_HOST = "ternegh0";
const VETH_NS = "ternegn0";
const HOST_SIDE = "10.255.77.2";
const PRIVATE = "10.255.77.1";
const LINK_LOCAL = "169.254.77.77";
/** TEST-NET-2 (RFC 5737): never routed on the internet; here it leads into our namespace only. */
const PUBLIC_LIKE = "198.51.100.77";
const NS_PORT = 7777;
const PEER_PORT = 8080;

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: "utf8", stdio: "pipe" });
const trySh = (cmd: string, ...args: string[]) => {
  try {
    sh(cmd, ...args);
  } catch {
    // Already gone.
  }
};

/** A second guard: whatever happens to the veth, nothing for these ranges leaves the machine. */
const SAFETY_NETS = ["10.255.77.0/24", "169.254.77.0/24", "198.51.100.0/24"];

const removeNamespace = () => {
  trySh("ip", "netns", "del", NS);
  trySh("ip", "link", "del", VETH_HOST);
  for (const net of SAFETY_NETS) trySh("ip", "route", "del", "blackhole", net);
};

const makeNamespace = () => {
  removeNamespace();
  for (const net of SAFETY_NETS) sh("ip", "route", "add", "blackhole", net);
  sh("ip", "netns", "add", NS);
  sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS, "netns", NS);
  sh("ip", "addr", "add", `${HOST_SIDE}/32`, "dev", VETH_HOST);
  sh("ip", "link", "set", VETH_HOST, "up");
  sh("ip", "-n", NS, "link", "set", "lo", "up");
  sh("ip", "-n", NS, "link", "set", VETH_NS, "up");
  for (const a of [PRIVATE, LINK_LOCAL, PUBLIC_LIKE]) {
    sh("ip", "-n", NS, "addr", "add", `${a}/32`, "dev", VETH_NS);
    sh("ip", "route", "add", `${a}/32`, "dev", VETH_HOST);
  }
  sh("ip", "-n", NS, "route", "add", `${HOST_SIDE}/32`, "dev", VETH_NS);
  sh("ip", "-n", NS, "route", "add", "default", "via", HOST_SIDE, "dev", VETH_NS, "onlink");
};

/** The one guard between a probe and a real network: each address must lead into our veth. */
const assertLocalRoutes = () => {
  for (const a of [PRIVATE, LINK_LOCAL, PUBLIC_LIKE]) {
    const route = sh("ip", "route", "get", a);
    if (!route.includes(`dev ${VETH_HOST}`))
      throw new Error(`refusing to probe ${a}: it is routed elsewhere (${route})`);
  }
};

const listen = async (host: string): Promise<Server> => {
  // A probe closes with the answer unread (a reset): not an error here.
  const server = createServer((s) => s.on("error", () => undefined).end("ok\n"));
  server.listen(0, host);
  await once(server, "listening");
  return server;
};
const portOf = (s: Server) => (s.address() as { port: number }).port;

const canConnect = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host, port, timeout: 1000 });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
    s.once("timeout", () => {
      s.destroy();
      resolve(false);
    });
  });

/** Each argument is HOST:PORT (TCP: a connect) or udp/HOST:PORT (a datagram that the listener echoes). */
const PROBE = `for t in "$@"; do
  a=\${t#udp/}; h=\${a%:*}; p=\${a##*:}
  if [ "$a" != "$t" ]; then
    timeout 3 python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(b"x", (sys.argv[1], int(sys.argv[2]))); s.recv(16)' "$h" "$p" 2>/dev/null
  else
    timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" "$p" 2>/dev/null
  fi
  if [ $? -eq 0 ]; then echo "$t open"; else echo "$t closed"; fi
done`;

let host = "";
let driver: SandboxDriver;
let probe: DockerProbe;
let bridge = "";
let gateway = "";
let nsListener: ChildProcess | null = null;
let apiLike: Server;
let gitLike: Server;
let gatewayOnly: Server;
let hasRunsc = false;
const namespace = `terntest-egress-${randomBytes(4).toString("hex")}`;
const networkName = namespace;
const ids: Record<"prober" | "peer" | "gvisor", string> = { prober: "", peer: "", gvisor: "" };
let targets: Record<string, string> = {};
const tally = { tried: 0, contained: 0 };

const spec = (name: string, extra: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: `${namespace}-${name}`,
  image: "tern-sandbox:latest",
  labels: { [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace },
  limits: { memoryMb: 256, cpus: 0.5, pids: 128 },
  ...extra,
});

const probeFrom = async (from: string): Promise<Record<string, "open" | "closed">> => {
  assertLocalRoutes();
  const r = await driver.exec(from, {
    cmd: ["bash", "-c", PROBE, "probe", ...Object.values(targets)],
    timeoutMs: 60_000,
  });
  expect(r.exitCode, `${r.stdout}${r.stderr}`).toBe(0);
  const byTarget = new Map(
    r.stdout
      .trim()
      .split("\n")
      .map((l) => l.split(" ") as [string, "open" | "closed"]),
  );
  // Other test files' networks come and go while this one runs: an address of the host that is gone
  // after the probe says nothing about the policy, and is left out of what the probe saw.
  const present = new Set(hostAddressesNow());
  return Object.fromEntries(
    Object.entries(targets)
      .filter(([name]) => !name.startsWith(HOST_AT) || present.has(name.slice(HOST_AT.length)))
      .map(([name, t]) => [name, byTarget.get(t) ?? "closed"]),
  );
};

/** What a probe should have seen: `open` for those named, `closed` for every other target it probed. */
const expected = (seen: Record<string, string>, open: string[]) =>
  Object.fromEntries(Object.keys(seen).map((k) => [k, open.includes(k) ? "open" : "closed"]));

const policy = (over: Partial<EgressPolicy> = {}): EgressPolicy => ({
  mode: "public",
  services: [{ address: gateway, port: portOf(gitLike) }],
  allow: [],
  resolvers: hostResolvers(),
  hostNetworks: hostNetworks(),
  ...over,
});

const HOST_AT = "host at ";

/** The host's IPv4 addresses (loopback left out), as they are now. */
const hostAddressesNow = () =>
  sh("ip", "-4", "-o", "addr", "show")
    .split("\n")
    .flatMap((l) => l.match(/ inet ([0-9.]+)\//)?.slice(1) ?? [])
    .filter((a) => !a.startsWith("127."));

/** Counts the probes that a policy is meant to stop, and those it did stop. */
const count = (seen: Record<string, string>, mustBeOpen: string[]) => {
  for (const [name, state] of Object.entries(seen)) {
    if (mustBeOpen.includes(name)) continue;
    tally.tried++;
    if (state === "closed") tally.contained++;
  }
};

beforeAll(async () => {
  host = await ensureTestEngine(2);
  driver = engineSandboxDriver(host, networkName);
  probe = createDockerProbe({ host });
  hasRunsc = (await probe.runtimes()).includes("runsc");
  gateway = (await driver.prepare()).hostAddress ?? "";
  ({ bridge } = await probe.bridgeOf(networkName));

  makeNamespace();
  nsListener = spawn(
    "ip",
    [
      "netns",
      "exec",
      NS,
      process.execPath,
      "-e",
      `require("net").createServer((s) => s.on("error", () => {}).end("ok\\n")).listen(${NS_PORT}, "0.0.0.0");
       const u = require("dgram").createSocket("udp4"); u.on("message", (m, r) => u.send(m, r.port, r.address)); u.bind(${NS_PORT});`,
    ],
    { stdio: "ignore" },
  );
  const deadline = Date.now() + 15_000;
  while (!(await canConnect(PRIVATE, NS_PORT))) {
    if (Date.now() > deadline) throw new Error("the namespace's listener did not start");
    await new Promise((r) => setTimeout(r, 50));
  }

  // The API binds every address; a git server on the gateway is what the policy lets through.
  apiLike = await listen("0.0.0.0");
  gatewayOnly = await listen(gateway);
  gitLike = await listen(gateway);

  ids.peer = (await driver.create(spec("peer"))).ref;
  await driver.exec(ids.peer, {
    cmd: ["bash", "-c", `nohup python3 -m http.server ${PEER_PORT} >/dev/null 2>&1 &`],
  });
  const peerIp = (await probe.inspect(ids.peer)).NetworkSettings.Networks[networkName]?.IPAddress;
  ids.prober = (await driver.create(spec("prober"))).ref;
  // Under runsc the pid limit counts gVisor's own host threads too (its ptrace platform has one per
  // task): at 128 the sandbox dies on the probe's few processes, at the worker's default it does not.
  if (hasRunsc) {
    ids.gvisor = (
      await driver.create(spec("gvisor", { runtime: "runsc", limits: { memoryMb: 512, cpus: 1, pids: 512 } }))
    ).ref;
  }

  // Every IPv4 address of the host, its other bridges' gateways included (up or not).
  const hostAddresses = hostAddressesNow().filter((a) => a !== gateway);
  targets = {
    "host via the gateway": `${gateway}:${portOf(apiLike)}`,
    "listener on the gateway": `${gateway}:${portOf(gatewayOnly)}`,
    ...Object.fromEntries(hostAddresses.map((a) => [`${HOST_AT}${a}`, `${a}:${portOf(apiLike)}`])),
    "another sandbox": `${peerIp}:${PEER_PORT}`,
    "private address": `${PRIVATE}:${NS_PORT}`,
    "private address, UDP": `udp/${PRIVATE}:${NS_PORT}`,
    "link-local address": `${LINK_LOCAL}:${NS_PORT}`,
    "public address": `${PUBLIC_LIKE}:${NS_PORT}`,
    "git host on the gateway": `${gateway}:${portOf(gitLike)}`,
  };
  // The peer's server answers before any probe counts on it: a peer never up fails here, by name.
  await waitFor(
    async () =>
      (
        await driver.exec(ids.prober, { cmd: ["bash", "-c", PROBE, "probe", targets["another sandbox"]!] })
      ).stdout.includes("open"),
    { what: "the peer sandbox's server to answer the prober", timeoutMs: 60_000, intervalMs: 100 },
  );
}, 15 * 60_000);

afterAll(async () => {
  // The host's own state first: whatever fails after, no namespace, route or rule of ours stays.
  nsListener?.kill("SIGKILL");
  removeNamespace();
  if (bridge) await removeEgressPolicy(bridge);
  for (const id of Object.values(ids)) if (id) await driver.destroy(id).catch(() => undefined);
  await probe?.removeNetwork(networkName).catch(() => undefined);
  apiLike?.close();
  gitLike?.close();
  gatewayOnly?.close();
  if (tally.tried) console.info(`egress probes: ${tally.contained} of ${tally.tried} contained`);
  // Nothing of ours is left in the host's rules or namespaces.
  if (bridge) expect(sh("iptables", "-S")).not.toContain(bridge);
  expect(sh("ip", "netns", "list")).not.toContain(NS);
});

describe("sandbox egress policy", () => {
  it("without it, the probe reaches every target (so the probe can fail)", async () => {
    await removeEgressPolicy(bridge);
    const baseline = await probeFrom(ids.prober);
    expect(baseline).toEqual(expected(baseline, Object.keys(targets)));
  });

  it("public: no host address, sandbox, private or link-local address; the git host's port and public addresses pass", async () => {
    await applyEgressPolicy({ bridge, policy: policy() });
    const seen = await probeFrom(ids.prober);
    const open = ["git host on the gateway", "public address"];
    expect(seen).toEqual(expected(seen, open));
    count(seen, open);
  });

  it("none: only the git host; allowlist: the git host and the allowed entries, private ones included", async () => {
    await applyEgressPolicy({ bridge, policy: policy({ mode: "none" }) });
    const none = await probeFrom(ids.prober);
    expect(none).toEqual(expected(none, ["git host on the gateway"]));
    count(none, ["git host on the gateway"]);

    await applyEgressPolicy({ bridge, policy: policy({ mode: "allowlist", allow: [`${PUBLIC_LIKE}/32`, PRIVATE] }) });
    const open = ["git host on the gateway", "public address", "private address", "private address, UDP"];
    const allowlist = await probeFrom(ids.prober);
    expect(allowlist).toEqual(expected(allowlist, open));
    count(allowlist, open);
  });

  it("is replaced, never duplicated, when applied again; says when it held other settings", async () => {
    // One policy, applied twice: read again, the host's networks may have changed in between (other
    // test files make networks on this engine), and the second would rightly replace the first.
    const same = policy();
    expect((await applyEgressPolicy({ bridge, policy: same })).replaced).toBe(true);
    expect((await applyEgressPolicy({ bridge, policy: same })).replaced).toBe(false);
    const jumps = (chain: string) =>
      sh("iptables", "-S", chain)
        .split("\n")
        .filter((l) => l.includes(`-i ${bridge} `));
    expect(jumps("DOCKER-USER")).toEqual([`-A DOCKER-USER -i ${bridge} -j TERN-EGRESS-${bridge}`]);
    expect(jumps("INPUT")).toEqual([`-A INPUT -i ${bridge} -j TERN-INPUT-${bridge}`]);
    expect(sh("iptables", "-S", "DOCKER-USER").split("\n")[1]).toBe(
      `-A DOCKER-USER -i ${bridge} -j TERN-EGRESS-${bridge}`,
    );
  });

  it("holds a gVisor (runsc) sandbox too: its --network=host is the sandbox's own network namespace", async (ctx) => {
    if (!hasRunsc) {
      console.info(`skipped: engine ${host} has no runsc runtime`);
      ctx.skip();
    }
    await removeEgressPolicy(bridge);
    // Without the policy every target answers; a gVisor sandbox's first connections can outlast the
    // probe's 3 s on a busy machine, so the baseline is read until it is whole (it must be, or fail).
    let baseline: Record<string, string> = {};
    await waitFor(
      async () => {
        baseline = await probeFrom(ids.gvisor);
        return Object.values(baseline).every((v) => v === "open");
      },
      { what: "every target to answer a gVisor sandbox without the policy", timeoutMs: 45_000 },
    ).catch(() => undefined);
    expect(baseline).toEqual(expected(baseline, Object.keys(targets)));
    await applyEgressPolicy({ bridge, policy: policy() });
    const seen = await probeFrom(ids.gvisor);
    const open = ["git host on the gateway", "public address"];
    expect(seen).toEqual(expected(seen, open));
    count(seen, open);
  });

  it("installs the IPv6 rules for networks with IPv6: unique-local and link-local refused", async () => {
    // Docker makes the IPv6 DOCKER-USER only with ip6tables on; what the policy makes here, the test removes.
    const hadV6DockerUser = (() => {
      try {
        sh("ip6tables", "-S", "DOCKER-USER");
        return true;
      } catch {
        return false;
      }
    })();
    await applyEgressPolicy({ bridge, policy: policy(), ipv6: true });
    const v6 = sh("ip6tables", "-S", `TERN-EGRESS-${bridge}`);
    expect(v6).toContain("-d fc00::/7 -j REJECT --reject-with icmp6-adm-prohibited");
    expect(v6).toContain("-d fe80::/10 -j REJECT --reject-with icmp6-adm-prohibited");
    expect(sh("ip6tables", "-S", `TERN-INPUT-${bridge}`)).toContain("-j REJECT --reject-with icmp6-adm-prohibited");
    await removeEgressPolicy(bridge);
    if (!hadV6DockerUser) {
      sh("ip6tables", "-D", "FORWARD", "-j", "DOCKER-USER");
      sh("ip6tables", "-X", "DOCKER-USER");
    }
    expect(sh("ip6tables", "-S")).not.toContain(bridge);
  });
});
