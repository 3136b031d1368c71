import { describe, expect, it } from "vitest";
import { canonicalCidr, type EgressPolicy, egressChains, egressRules, resolvConfNameservers } from "./egress.ts";

const policy = (over: Partial<EgressPolicy> = {}): EgressPolicy => ({
  mode: "public",
  services: [{ address: "172.18.0.1", port: 8443 }],
  resolvers: ["10.255.255.53"],
  allow: [],
  hostNetworks: ["192.0.2.0/24"],
  ...over,
});

describe("egress rules", () => {
  it("writes addresses as iptables prints them back", () => {
    expect(canonicalCidr("10.1.2.3")).toEqual({ cidr: "10.1.2.3/32", family: 4 });
    expect(canonicalCidr("10.1.2.3/8")).toEqual({ cidr: "10.0.0.0/8", family: 4 });
    expect(canonicalCidr("FD00:0:0::2")).toEqual({ cidr: "fd00::2/128", family: 6 });
    expect(canonicalCidr("fe80::1/10")).toEqual({ cidr: "fe80::/10", family: 6 });
    expect(canonicalCidr("::ffff:10.0.0.1")).toEqual({ cidr: "10.0.0.1/32", family: 4 });
    expect(() => canonicalCidr("not-an-address")).toThrow();
  });

  it("names two chains per bridge, within iptables' 28 characters", () => {
    expect(egressChains("br-3ed7aa801acc")).toEqual({
      forward: "TERN-EGRESS-br-3ed7aa801acc",
      input: "TERN-INPUT-br-3ed7aa801acc",
    });
    expect(() => egressChains("br-x; rm -rf /")).toThrow(/bridge/);
  });

  it("public: the named exceptions first, then private, link-local and the host's networks refused", () => {
    const { forward, input } = egressRules("br-x", policy({ allow: ["203.0.113.7", "10.9.0.0/16"] }), 4);
    const at = (rule: string) => forward.findIndex((r) => r.includes(rule));
    expect(forward[0]).toBe("-A TERN-EGRESS-br-x -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN");
    expect(forward).toContain("-A TERN-EGRESS-br-x -d 172.18.0.1/32 -p tcp -m tcp --dport 8443 -j RETURN");
    expect(forward).toContain("-A TERN-EGRESS-br-x -d 10.255.255.53/32 -p udp -m udp --dport 53 -j RETURN");
    expect(forward).toContain("-A TERN-EGRESS-br-x -d 10.9.0.0/16 -j RETURN");
    for (const cidr of [
      "10.0.0.0/8",
      "172.16.0.0/12",
      "192.168.0.0/16",
      "100.64.0.0/10",
      "169.254.0.0/16",
      "192.0.2.0/24",
    ]) {
      expect(forward).toContain(`-A TERN-EGRESS-br-x -d ${cidr} -p tcp -j REJECT --reject-with tcp-reset`);
      expect(forward).toContain(`-A TERN-EGRESS-br-x -d ${cidr} -j REJECT --reject-with icmp-admin-prohibited`);
      expect(at(`-d ${cidr} `)).toBeGreaterThan(at("-d 10.9.0.0/16 -j RETURN"));
    }
    // Public traffic falls through to Docker's own rules: no catch-all refusal.
    expect(forward.at(-1)).toMatch(/-d \S+ -j REJECT/);
    // The host itself: only the git host's port and DNS, whatever the mode.
    expect(input.slice(-2)).toEqual([
      "-A TERN-INPUT-br-x -p tcp -j REJECT --reject-with tcp-reset",
      "-A TERN-INPUT-br-x -j REJECT --reject-with icmp-admin-prohibited",
    ]);
    expect(input.join("\n")).not.toContain("10.9.0.0/16");
  });

  it("none and allowlist end in a refusal of everything else", () => {
    for (const mode of ["none", "allowlist"] as const) {
      const { forward } = egressRules("br-x", policy({ mode, allow: ["203.0.113.7"] }), 4);
      expect(forward.slice(-2)).toEqual([
        "-A TERN-EGRESS-br-x -p tcp -j REJECT --reject-with tcp-reset",
        "-A TERN-EGRESS-br-x -j REJECT --reject-with icmp-admin-prohibited",
      ]);
      expect(forward).toContain("-A TERN-EGRESS-br-x -d 203.0.113.7/32 -j RETURN");
    }
  });

  it("IPv6: unique-local and link-local refused; each family gets only its own addresses", () => {
    const { forward } = egressRules("br-x", policy({ allow: ["2001:db8::1", "10.0.0.1"] }), 6);
    expect(forward).toContain("-A TERN-EGRESS-br-x -d fc00::/7 -j REJECT --reject-with icmp6-adm-prohibited");
    expect(forward).toContain("-A TERN-EGRESS-br-x -d fe80::/10 -j REJECT --reject-with icmp6-adm-prohibited");
    expect(forward).toContain("-A TERN-EGRESS-br-x -d 2001:db8::1/128 -j RETURN");
    expect(forward.join("\n")).not.toMatch(/10\.0\.0\.1|172\.18|10\.255/);
  });

  it("DNS: the resolv.conf servers Docker forwards to from the sandbox (loopback ones it queries from the host)", () => {
    const conf =
      "# comment\nnameserver 10.255.255.53\nnameserver 127.0.0.53\nnameserver fe80::1%eth0\noptions ndots:0\n";
    expect(resolvConfNameservers(conf)).toEqual(["10.255.255.53", "fe80::1"]);
  });
});
