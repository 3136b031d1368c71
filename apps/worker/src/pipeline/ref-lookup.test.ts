import { execFile } from "node:child_process";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { promisify } from "node:util";
import { checkedFetch } from "@tern/core";
import { type GitServer, startGitServer } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GitAccess } from "../git/run-git.ts";
import { lookUpRef, pktLines } from "./ref-lookup.ts";

const run = promisify(execFile);

/** The deployment's own git host: private and plain http are allowed for it. */
const fetchOwnHost = checkedFetch({
  policy: { allowPrivate: true, allowHttp: true },
  settings: "GIT",
  maxResponseBytes: 1024 * 1024,
});
const opts = { fetch: fetchOwnHost, timeoutMs: 5_000 };

let open: GitServer;
let closed: GitServer;
const TOKEN = "tok-ref-lookup-1234";

const accessTo = (server: GitServer, repo: string, token: string | null = null): GitAccess => ({
  url: `${server.url}/${repo}.git`,
  provider: "github",
  token,
  allowHttp: true,
});

const revParse = async (server: GitServer, repo: string, rev: string): Promise<string> =>
  (await run("git", ["--git-dir", join(server.root, `${repo}.git`), "rev-parse", rev])).stdout.trim();

beforeAll(async () => {
  open = await startGitServer({ host: "127.0.0.1" });
  closed = await startGitServer({ host: "127.0.0.1", token: TOKEN });
  const branches = { feature: { "f.txt": "feature\n" }, feat: { "g.txt": "feat\n" } };
  await open.createFixtureRepo("acme/refs", { "a.txt": "a\n" }, { branches, defaultBranch: "trunk" });
  await closed.createFixtureRepo("acme/private", { "a.txt": "a\n" });
});

afterAll(async () => {
  await open?.close();
  await closed?.close();
});

describe("lookUpRef", () => {
  it("gives the default branch's commit for HEAD, and a branch's for its ref, in one request", async () => {
    const before = open.requests.length;
    expect(await lookUpRef(accessTo(open, "acme/refs"), "HEAD", opts)).toBe(await revParse(open, "acme/refs", "trunk"));
    // Protocol v2's ls-refs alone: no capability request first.
    expect(open.requests.slice(before)).toEqual(["POST /acme/refs.git/git-upload-pack authorized"]);
    expect(await lookUpRef(accessTo(open, "acme/refs"), "refs/heads/feature", opts)).toBe(
      await revParse(open, "acme/refs", "feature"),
    );
  });

  it("takes exactly the ref asked for, not another that it is a prefix of", async () => {
    const feat = await revParse(open, "acme/refs", "feat");
    expect(feat).not.toBe(await revParse(open, "acme/refs", "feature"));
    expect(await lookUpRef(accessTo(open, "acme/refs"), "refs/heads/feat", opts)).toBe(feat);
  });

  it("answers null for a branch or repository that does not exist", async () => {
    expect(await lookUpRef(accessTo(open, "acme/refs"), "refs/heads/nope", opts)).toBeNull();
    expect(await lookUpRef(accessTo(open, "acme/missing"), "HEAD", opts)).toBeNull();
  });

  it("sends the token as git does (Basic auth), and a refused token gets null", async () => {
    const before = closed.requests.length;
    expect(await lookUpRef(accessTo(closed, "acme/private", TOKEN), "HEAD", opts)).toBe(
      await revParse(closed, "acme/private", "HEAD"),
    );
    expect(closed.requests[before]).toBe("POST /acme/private.git/git-upload-pack authorized");
    expect(await lookUpRef(accessTo(closed, "acme/private", "wrong-token"), "HEAD", opts)).toBeNull();
    expect(await lookUpRef(accessTo(closed, "acme/private"), "HEAD", opts)).toBeNull();
  });

  it("refuses a host the policy does not allow before connecting", async () => {
    const before = open.requests.length;
    const publicOnly = checkedFetch({ policy: { allowPrivate: false, allowHttp: true }, settings: "GIT" });
    expect(await lookUpRef(accessTo(open, "acme/refs"), "HEAD", { fetch: publicOnly, timeoutMs: 5_000 })).toBeNull();
    expect(open.requests.length).toBe(before);
  });

  describe("against a server that does not speak protocol v2", () => {
    const oid = "0123456789abcdef0123456789abcdef01234567";
    const other = "89abcdef0123456789abcdef0123456789abcdef";
    const line = (s: string) => `${(Buffer.byteLength(s) + 4).toString(16).padStart(4, "0")}${s}`;
    let server: Server;
    let url = "";
    const seen: string[] = [];

    beforeAll(async () => {
      server = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`);
        if (req.url === "/r.git/info/refs?service=git-upload-pack") {
          res.writeHead(200, { "content-type": "application/x-git-upload-pack-advertisement" });
          res.end(
            `${line("# service=git-upload-pack\n")}0000${line(`${oid} HEAD\0multi_ack symref=HEAD:refs/heads/main\n`)}${line(`${other} refs/heads/dev\n`)}${line(`${oid} refs/heads/main\n`)}0000`,
          );
          return;
        }
        if (req.url === "/moved.git/git-upload-pack" || req.url?.startsWith("/moved.git/info/refs")) {
          res.writeHead(302, { location: `${url}/r.git${req.url.slice("/moved.git".length)}` });
          res.end();
          return;
        }
        // A v0 server reads the ls-refs request as `want` lines and refuses it.
        res.writeHead(200, { "content-type": "application/x-git-upload-pack-result" });
        res.end(line("ERR protocol error: expected a want line\n"));
      });
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      const address = server.address();
      url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
    });

    afterAll(async () => {
      server.close();
    });

    const access = (repo: string): GitAccess => ({
      url: `${url}/${repo}.git`,
      provider: "github",
      token: null,
      allowHttp: true,
    });

    it("reads its ref advertisement instead", async () => {
      expect(await lookUpRef(access("r"), "HEAD", opts)).toBe(oid);
      expect(await lookUpRef(access("r"), "refs/heads/dev", opts)).toBe(other);
      expect(await lookUpRef(access("r"), "refs/heads/de", opts)).toBeNull();
    });

    it("follows no redirect (a token's header could go where the server names)", async () => {
      seen.length = 0;
      expect(await lookUpRef(access("moved"), "HEAD", opts)).toBeNull();
      expect(seen.every((s) => s.startsWith("POST /moved.git") || s.startsWith("GET /moved.git"))).toBe(true);
    });
  });
});

describe("pktLines", () => {
  it("reads lines to the first flush and says where the rest begins", () => {
    const buf = Buffer.from("0009abcd\n00000009efgh\n0000");
    expect(pktLines(buf)).toEqual({ lines: ["abcd"], next: 13 });
    expect(pktLines(buf, 13)).toEqual({ lines: ["efgh"], next: buf.length });
  });

  it("is null for what is not pkt-lines, or is cut short", () => {
    expect(pktLines(Buffer.from("<html>not git</html>"))).toBeNull();
    expect(pktLines(Buffer.from("0010abc"))).toBeNull();
    expect(pktLines(Buffer.from("0009abcd\n"))).toBeNull();
  });
});
