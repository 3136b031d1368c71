import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Transform } from "node:stream";
import { ForbiddenError, NotFoundError, RepositoryFaultError } from "@tern/core";
import type { ExecOptions, ExecResult, SandboxDriver, SandboxRef } from "@tern/sandbox";
import type { ResolvedAccess } from "./git-access.ts";
import { gitEnvFor, runGit } from "./run-git.ts";

const CLONE_TIMEOUT_MS = 10 * 60_000;

export interface CloneRequest {
  /** `owner/repo`, for messages. */
  fullName: string;
  branch: string | null;
  access: ResolvedAccess;
}

/** Git's words for the faults that are the user's to fix; anything else is worth retrying. */
const cloneFailure = (req: CloneRequest, output: string): Error => {
  const { provider, source } = req.access;
  if (/Remote branch .* not found|couldn't find remote ref/i.test(output)) {
    return new NotFoundError(`branch '${req.branch}' not found in ${req.fullName}`);
  }
  // Not found and no access say the same: the answer must not tell which private repositories exist.
  if (
    /repository '.*' not found|Repository not found|returned error: 40[134]|Authentication failed|could not read Username|terminal prompts disabled/i.test(
      output,
    )
  ) {
    const whose =
      source === "user"
        ? `with your ${provider} token (or the ${provider} token was refused)`
        : source === "shared"
          ? `with the deployment's ${provider} token`
          : `without a ${provider} token (add yours with POST /api/v1/git/providers)`;
    return new NotFoundError(`repository ${req.fullName} was not found, or cannot be read ${whose}`);
  }
  if (/unable to update url base from redirection|redirect/i.test(output)) {
    return new ForbiddenError(`the ${provider} host answered with a redirect, which is not followed`);
  }
  return new Error(`git clone of ${req.fullName} failed: ${lastLine(output)}`);
};

const lastLine = (text: string): string =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-3)
    .join(" / ")
    .slice(0, 600);

/** No file git keeps beside the objects may hold the token (the header was only ever in the environment). */
const assertNoCredential = async (gitDir: string, token: string | null): Promise<void> => {
  if (!token) return;
  const needles = [token, Buffer.from(token).toString("base64")];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      if (e.name === "objects") continue;
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) {
        const text = await readFile(p, "latin1");
        if (needles.some((n) => text.includes(n)))
          throw new Error("a credential was found in the clone's .git; not handed over");
      }
    }
  };
  await walk(gitDir);
};

/**
 * The remote is the repository's URL without credentials; nothing under `http.` is kept. The clone
 * writes exactly that (the token travels in the environment), so git runs only when the config says
 * otherwise: three git processes less beside the sandbox's create on every start.
 */
const stripCredentials = async (repo: string, access: ResolvedAccess, env: Record<string, string>) => {
  const config = await readFile(join(repo, ".git", "config"), "utf8");
  const urls = config.split("\n").filter((l) => /^\s*url\s*=/i.test(l));
  const clean =
    !/\[\s*http|credential/i.test(config) &&
    urls.length === 1 &&
    urls[0]?.split("=").slice(1).join("=").trim() === access.url;
  if (clean) return;
  await runGit(["config", "--local", "remote.origin.url", access.url], { cwd: repo, env, timeoutMs: 10_000 });
  await runGit(["config", "--local", "--remove-section", "http"], { cwd: repo, env, timeoutMs: 10_000 });
  await runGit(["config", "--local", "--unset-all", "credential.helper"], { cwd: repo, env, timeoutMs: 10_000 });
};

/** What the exec that unpacked the tree answered, and what it was sent. */
interface HandedOver {
  result: ExecResult;
  /** The tar's size. */
  bytes: number;
}

/** A clone on the worker, not yet in any sandbox: it can be made while the sandbox is. */
export interface WorkerClone {
  /** The commit checked out. */
  commit: string;
  /** Whose token read it (for the log). */
  tokenSource: ResolvedAccess["source"];
  /** Whether the tree holds `path` (a file, directory or link; never followed), read on the worker. */
  holds(path: string): Promise<boolean>;
  /**
   * Fails (a RepositoryFaultError) when the tree's tar would pass `maxBytes`, counted on the worker
   * from its files' sizes: the stage that clones says so, before any exec that would carry it.
   */
  checkSize(maxBytes: number): Promise<void>;
  /**
   * Runs one exec in the sandbox with the tree as a tar on its stdin, for it to unpack (`tar -x`)
   * under the name `execFor` is given (the one its entries carry), then removes the worker's copy.
   * One exec both hands the tree over and does what follows (placing it, the setup script): a
   * put-archive of its own cost as much again. Fails past `maxBytes` (a RepositoryFaultError).
   */
  handOverIn(
    sandboxes: Pick<SandboxDriver, "exec">,
    ref: SandboxRef,
    maxBytes: number,
    execFor: (staged: string) => ExecOptions,
  ): Promise<HandedOver>;
  /** Removes the worker's copy (idempotent): a start that ends before the hand-over. */
  discard(): Promise<void>;
}

/**
 * Clones on the worker, into a temporary directory; `handOverIn` streams the tree into the sandbox as
 * a tar (unpacked there by the sandbox user, so owned by it): the sandbox never sees the token. No
 * repository code runs on the worker: git runs no hooks and no filters here, and the tree is only packed.
 */
export const cloneOnWorker = async (req: CloneRequest): Promise<WorkerClone> => {
  const root = await mkdtemp(join(tmpdir(), "tern-clone-"));
  const discard = () => rm(root, { recursive: true, force: true });
  try {
    const home = join(root, "home");
    await mkdir(home);
    const staged = `.tern-clone-${randomBytes(6).toString("hex")}`;
    const repo = join(root, staged);
    const env = gitEnvFor(req.access, home);
    const branchArgs = req.branch ? ["--branch", req.branch] : [];
    const r = await runGit(
      ["clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags", ...branchArgs, "--", req.access.url, repo],
      { cwd: root, env, timeoutMs: CLONE_TIMEOUT_MS, secrets: [req.access.token] },
    );
    if (r.timedOut) throw new Error(`git clone of ${req.fullName} did not finish in ${CLONE_TIMEOUT_MS / 1000} s`);
    if (r.code !== 0) throw cloneFailure(req, `${r.stderr}\n${r.stdout}`);
    // Without the token from here on: nothing below talks to the host.
    const local = gitEnvFor({ ...req.access, token: null }, home);
    await stripCredentials(repo, req.access, local);
    await assertNoCredential(join(repo, ".git"), req.access.token);
    const head = await runGit(["rev-parse", "HEAD"], { cwd: repo, env: local, timeoutMs: 10_000 });
    return {
      commit: head.stdout.trim(),
      tokenSource: req.access.source,
      holds: (path) =>
        lstat(join(repo, path)).then(
          () => true,
          () => false,
        ),
      async checkSize(maxBytes) {
        if ((await tarBytes(repo)) > maxBytes) throw tooLarge(maxBytes);
      },
      async handOverIn(sandboxes, ref, maxBytes, execFor) {
        const packing = packTree(root, staged, maxBytes);
        try {
          let result: ExecResult;
          try {
            result = await sandboxes.exec(ref, { ...execFor(staged), stdin: packing.tar });
          } catch (err) {
            throw (await packing.end(true)).fault ?? err;
          }
          // An exec that failed may have stopped reading; one that succeeded read it all.
          const packed = await packing.end(result.exitCode !== 0);
          if (packed.fault) throw packed.fault;
          // The sandbox's tar read a whole archive only if the worker's wrote one.
          if (result.exitCode === 0 && packed.code !== 0) {
            throw new Error(`packing the clone failed: ${packed.stderr.trim().slice(0, 300)}`);
          }
          return { result, bytes: packed.bytes };
        } finally {
          await discard();
        }
      },
      discard,
    };
  } catch (err) {
    await discard();
    throw err;
  }
};

/** How long a finished exec's tar has to exit before it is stopped (it wrote its last record by then). */
const PACK_EXIT_WAIT_MS = 10_000;

const tooLarge = (maxBytes: number) =>
  new RepositoryFaultError(`the repository is larger than GIT_CLONE_MAX_MB (${maxBytes / 1048576} MiB)`);

/** About what tar makes of `dir`: a 512-byte header per entry, each file's bytes in 512-byte blocks. */
const tarBytes = async (dir: string): Promise<number> => {
  let bytes = 512;
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    bytes += 512;
    if (e.isDirectory()) bytes += await tarBytes(p);
    else if (e.isFile()) bytes += Math.ceil((await lstat(p)).size / 512) * 512;
  }
  return bytes;
};

/**
 * tar of `dir` (symbolic links kept as links, never followed), as it is made; `end` says how it went
 * (`fault` past `maxBytes`), stopping it first when told (its reader may be gone: an exec that failed).
 */
const packTree = (root: string, dir: string, maxBytes: number) => {
  const tar = spawn("tar", ["-C", root, "-c", "--numeric-owner", "--owner=1000", "--group=1000", "--", dir], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  tar.stderr.on("data", (d: Buffer) => {
    stderr += d.toString("utf8");
  });
  let bytes = 0;
  let fault: RepositoryFaultError | null = null;
  const counted = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        fault = tooLarge(maxBytes);
        tar.kill("SIGKILL");
        done(fault);
        return;
      }
      done(null, chunk);
    },
  });
  // The exec that reads it says why it stopped; nothing else needs to hear it.
  counted.on("error", () => undefined);
  const exited = new Promise<number | null>((resolve) => tar.on("close", resolve));
  tar.stdout.pipe(counted);
  return {
    tar: counted,
    async end(stop: boolean) {
      const running = () => tar.exitCode === null && tar.signalCode === null;
      if (stop && running()) tar.kill("SIGKILL");
      // A reader that read the whole archive leaves it done at once; one that did not is never waited for.
      const late = setTimeout(() => running() && tar.kill("SIGKILL"), PACK_EXIT_WAIT_MS);
      const code = await exited;
      clearTimeout(late);
      return { code, bytes, stderr, fault: fault as RepositoryFaultError | null };
    },
  };
};
