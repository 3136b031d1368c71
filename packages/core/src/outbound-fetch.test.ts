import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OutboundAddressError, type OutboundAddressPolicy, type Resolver } from "./outbound-address.ts";
import { checkedFetch } from "./outbound-fetch.ts";

const pinnedFetch = (policy: OutboundAddressPolicy, resolve?: Resolver) =>
  checkedFetch({ policy, settings: "MCP", resolve });

// The address rules of every URL a user names, applied at each request on the address then used.
let server: Server;
let port = 0;
let hits = 0;
beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    res.writeHead(200, { "content-type": "text/plain" }).end(`hello ${req.method} ${req.headers["x-probe"] ?? ""}`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

/** A name no real resolver knows: only our resolver's answer can take a connection anywhere. */
const NAME = "mcp.rebind.invalid";

describe("checkedFetch", () => {
  it("refuses a name resolving to loopback, at request time, without connecting", async () => {
    let lookups = 0;
    const resolve: Resolver = async () => {
      lookups++;
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const fetch = pinnedFetch({ allowPrivate: false, allowHttp: true }, resolve);
    const before = hits;
    await expect(fetch(`http://${NAME}:${port}/mcp`)).rejects.toThrow(OutboundAddressError);
    await expect(fetch(`http://${NAME}:${port}/mcp`)).rejects.toThrow(/loopback or link-local/);
    // Resolved again at each request: a name that moves to a private address is caught then.
    expect(lookups).toBe(2);
    expect(hits).toBe(before);
  });

  it("refuses when any address of the name is private, and a private literal", async () => {
    const resolve: Resolver = async () => [
      { address: "93.184.216.34", family: 4 },
      { address: "10.1.2.3", family: 4 },
    ];
    const fetch = pinnedFetch({ allowPrivate: false, allowHttp: true }, resolve);
    await expect(fetch(`http://${NAME}/mcp`)).rejects.toThrow(/10\.1\.2\.3/);
    await expect(fetch("http://169.254.169.254/latest/meta-data")).rejects.toThrow(OutboundAddressError);
    await expect(fetch("http://[::1]/mcp")).rejects.toThrow(OutboundAddressError);
  });

  it("refuses plain http unless allowed, and credentials in the URL", async () => {
    const fetch = pinnedFetch({ allowPrivate: true, allowHttp: false });
    await expect(fetch(`http://127.0.0.1:${port}/mcp`)).rejects.toThrow(/https/);
    await expect(pinnedFetch({ allowPrivate: true, allowHttp: true })(`http://u:p@127.0.0.1:${port}/`)).rejects.toThrow(
      /credentials/,
    );
  });

  it("when allowed, connects to the address it checked (pinned): a name only our resolver knows still reaches it", async () => {
    const resolve: Resolver = async () => [{ address: "127.0.0.1", family: 4 }];
    const fetch = pinnedFetch({ allowPrivate: true, allowHttp: true }, resolve);
    const res = await fetch(`http://${NAME}:${port}/mcp`, { method: "POST", headers: { "x-probe": "p1" }, body: "{}" });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello POST p1");
  });
});
