import type { CheckedFetch } from "@tern/core";
import { type GitAccess, gitAuthorization } from "../git/run-git.ts";

/**
 * The commit a ref of a remote repository is at, asked over smart HTTP from the worker's own process
 * (what `git ls-remote` asks, without a git and a git-remote-http process per start): git's protocol
 * v2 `ls-refs` in one POST, as servers that speak v2 answer it with no capability request first; a
 * server that does not is asked for its ref advertisement (protocol v0), as git would fall back to.
 */

/** A request's pkt-line: its length (4 hex digits, itself included) then its bytes. */
const pkt = (line: string): Buffer => {
  const body = Buffer.from(line, "utf8");
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, "0"), "ascii"), body]);
};
const FLUSH = Buffer.from("0000", "ascii");
const DELIM = Buffer.from("0001", "ascii");

/**
 * The data lines of a pkt-line stream up to its first flush (a delimiter or response end counts as
 * one too); null when the bytes are not pkt-lines (a page of HTML, a truncated answer).
 */
export const pktLines = (buf: Buffer, from = 0): { lines: string[]; next: number } | null => {
  const lines: string[] = [];
  let i = from;
  while (i + 4 <= buf.length) {
    const hex = buf.toString("ascii", i, i + 4);
    if (!/^[0-9a-f]{4}$/.test(hex)) return null;
    const len = Number.parseInt(hex, 16);
    if (len <= 2) return { lines, next: i + 4 };
    if (len < 4 || i + len > buf.length) return null;
    lines.push(buf.toString("utf8", i + 4, i + len).replace(/\n$/, ""));
    i += len;
  }
  return null;
};

const OID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** The object id of exactly `ref` among `oid ref[ attrs]` lines (a ref-prefix also matches longer names). */
const oidOf = (lines: string[], ref: string): string | null => {
  for (const line of lines) {
    const [oid, name] = line.split("\0", 1)[0]!.split(" ");
    if (name === ref && oid && OID.test(oid)) return oid;
  }
  return null;
};

export interface RefLookupOptions {
  /** The HTTP client (the one for URLs a user names, with the deployment's policy for this host). */
  fetch: CheckedFetch;
  timeoutMs: number;
}

const headersFor = (access: GitAccess, extra: Record<string, string>): Record<string, string> => ({
  // Some hosts serve the smart protocol only to a client that names itself git.
  "user-agent": "git/tern",
  ...(access.token ? { authorization: gitAuthorization(access.provider, access.token) } : {}),
  ...extra,
});

/** Protocol v2's answer; undefined when the server did not answer in v2 (then ask in v0). */
const lsRefsV2 = async (
  access: GitAccess,
  ref: string,
  opts: RefLookupOptions,
  signal: AbortSignal,
): Promise<string | null | undefined> => {
  const res = await opts.fetch(`${access.url}/git-upload-pack`, {
    method: "POST",
    headers: headersFor(access, {
      "content-type": "application/x-git-upload-pack-request",
      accept: "application/x-git-upload-pack-result",
      "git-protocol": "version=2",
    }),
    body: Buffer.concat([pkt("command=ls-refs\n"), DELIM, pkt(`ref-prefix ${ref}\n`), FLUSH]),
    signal,
  });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) return undefined;
  const parsed = pktLines(body);
  if (!parsed || parsed.next !== body.length || parsed.lines.some((l) => l.startsWith("ERR "))) return undefined;
  // Every line of a v2 answer is a ref: a v0 server reading our request as `want` lines answers otherwise.
  if (!parsed.lines.every((l) => OID.test(l.split(" ")[0] ?? ""))) return undefined;
  return oidOf(parsed.lines, ref);
};

/** Protocol v0's ref advertisement (every ref, with capabilities after the first). */
const advertisedRef = async (
  access: GitAccess,
  ref: string,
  opts: RefLookupOptions,
  signal: AbortSignal,
): Promise<string | null> => {
  const res = await opts.fetch(`${access.url}/info/refs?service=git-upload-pack`, {
    headers: headersFor(access, {}),
    signal,
  });
  const body = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) return null;
  // `# service=git-upload-pack`, a flush, then the refs.
  const service = pktLines(body);
  if (service?.lines[0] !== "# service=git-upload-pack") return null;
  const refs = pktLines(body, service.next);
  return refs ? oidOf(refs.lines, ref) : null;
};

/**
 * The commit `ref` (`HEAD` or `refs/heads/<branch>`) of the repository at `access.url` is at; null when
 * the host cannot say (no such ref, refused, unreachable, too slow): the start then clones.
 */
export const lookUpRef = async (access: GitAccess, ref: string, opts: RefLookupOptions): Promise<string | null> => {
  const signal = AbortSignal.timeout(opts.timeoutMs);
  try {
    const v2 = await lsRefsV2(access, ref, opts, signal);
    return v2 !== undefined ? v2 : await advertisedRef(access, ref, opts, signal);
  } catch {
    return null;
  }
};
