import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface GitServerOptions {
  /** Address to listen on: where sandboxes reach this host (`prepareTestSandboxes`), so they can clone. */
  host: string;
  /** When set, every request needs HTTP Basic auth whose password is this token (or one of `repoTokens`). */
  token?: string;
  /**
   * Tokens that read (and, with `receivePack`, write) only the repositories listed, as `owner/repo`
   * (`owner/repo:read`: read only, a push is 403). Another repository answers such a token 404, as
   * GitHub answers for a private repository one cannot see.
   */
  repoTokens?: Record<string, string[]>;
  /** Accept pushes (git-receive-pack), from any authorized token. */
  receivePack?: boolean;
}

export interface FixtureRepoOptions {
  /** Extra branches: each starts from the default branch and adds (or overwrites) these files. */
  branches?: Record<string, Record<string, string>>;
  defaultBranch?: string;
}

export interface GitServer {
  /** Base URL, as GIT_BASE_URL: repositories are at `${url}/${owner}/${repo}.git`. */
  url: string;
  root: string;
  /** One line per request: method, path, and whether it carried the right token. */
  requests: string[];
  /** `git show` in a bare repository: a file at a revision (`branch:path`), or null when there is none. */
  show: (name: string, spec: string) => Promise<string | null>;
  /** A bare repository `owner/repo` with `files` committed on the default branch (and `branches`). */
  createFixtureRepo: (name: string, files: Record<string, string>, opts?: FixtureRepoOptions) => Promise<void>;
  close: () => Promise<void>;
}

const git = (cwd: string, ...args: string[]) =>
  run("git", args, {
    cwd,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "Fixture",
      GIT_AUTHOR_EMAIL: "fixture@example.test",
      GIT_COMMITTER_NAME: "Fixture",
      GIT_COMMITTER_EMAIL: "fixture@example.test",
      GIT_CONFIG_NOSYSTEM: "1",
      HOME: cwd,
    },
  });

const writeFiles = async (dir: string, files: Record<string, string>) => {
  for (const [path, content] of Object.entries(files)) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, content, { mode: path.endsWith(".sh") ? 0o755 : 0o644 });
  }
};

/** The repository a request is for (`owner/repo`), from a path such as `/owner/repo.git/info/refs`. */
const repositoryOf = (url: string): string => {
  const path = decodeURIComponent(new URL(url, "http://x").pathname).replace(/^\/+/, "");
  const i = path.indexOf(".git/");
  return i < 0 ? path.replace(/\.git$/, "") : path.slice(0, i);
};

/**
 * "ok", "unauthorized" (no token, or one the server does not know: 401), "hidden" (a token without
 * access: 404) or "read-only" (a push with a token that only reads: 403).
 */
const authorize = (req: IncomingMessage, opts: GitServerOptions): "ok" | "unauthorized" | "hidden" | "read-only" => {
  if (!opts.token && !opts.repoTokens) return "ok";
  const header = req.headers.authorization ?? "";
  if (!header.startsWith("Basic ")) return "unauthorized";
  const decoded = Buffer.from(header.slice(6), "base64").toString("utf8");
  const password = decoded.slice(decoded.indexOf(":") + 1);
  if (opts.token && password === opts.token) return "ok";
  const repos = opts.repoTokens?.[password];
  if (!repos) return "unauthorized";
  const repo = repositoryOf(req.url ?? "/");
  if (repos.includes(repo)) return "ok";
  if (!repos.includes(`${repo}:read`)) return "hidden";
  return (req.url ?? "").includes("git-receive-pack") ? "read-only" : "ok";
};

/** Smart HTTP through `git http-backend` (CGI): the real protocol a clone in a sandbox speaks. */
const serveCgi = (root: string, req: IncomingMessage, res: ServerResponse, receivePack: boolean) => {
  const url = new URL(req.url ?? "/", "http://x");
  const child = spawn("git", ["http-backend"], {
    // Its stderr is not read: ignored, so a chatty backend never blocks on a full pipe.
    stdio: ["pipe", "pipe", "ignore"],
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: "1",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_COUNT: "1",
      GIT_CONFIG_KEY_0: "http.receivepack",
      GIT_CONFIG_VALUE_0: receivePack ? "true" : "false",
      HOME: root,
      PATH_INFO: decodeURIComponent(url.pathname),
      REQUEST_METHOD: req.method ?? "GET",
      QUERY_STRING: url.search.replace(/^\?/, ""),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      REMOTE_USER: "fixture",
      REMOTE_ADDR: req.socket.remoteAddress ?? "",
      GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
      HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
    },
  });
  // A backend that answers before reading the whole request (an error) closes its stdin early.
  child.stdin.on("error", () => undefined);
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
      const i = line.indexOf(":");
      if (i < 0) continue;
      const key = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (key.toLowerCase() === "status") status = Number.parseInt(value, 10) || 200;
      else res.setHeader(key, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  child.stdout.on("end", () => {
    if (!headersDone) res.writeHead(502);
    res.end();
  });
  child.on("error", () => {
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
};

export const startGitServer = async (opts: GitServerOptions): Promise<GitServer> => {
  const root = await mkdtemp(join(tmpdir(), "tern-git-"));
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const verdict = authorize(req, opts);
    requests.push(`${req.method} ${req.url} ${verdict === "ok" ? "authorized" : verdict}`);
    if (verdict === "unauthorized") {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="fixture"' });
      res.end("unauthorized\n");
      return;
    }
    if (verdict === "read-only") {
      res.writeHead(403);
      res.end("Write access to repository not granted.\n");
      return;
    }
    if (verdict === "hidden") {
      res.writeHead(404);
      res.end("Repository not found.\n");
      return;
    }
    serveCgi(root, req, res, opts.receivePack ?? false);
  });
  server.listen(0, opts.host);
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;

  return {
    url: `http://${opts.host}:${port}`,
    root,
    requests,
    async show(name, spec) {
      try {
        const r = await run("git", ["--git-dir", join(root, `${name}.git`), "show", spec]);
        return r.stdout;
      } catch {
        return null;
      }
    },
    async createFixtureRepo(name, files, repoOpts = {}) {
      const defaultBranch = repoOpts.defaultBranch ?? "main";
      const bare = join(root, `${name}.git`);
      await mkdir(dirname(bare), { recursive: true });
      await git(root, "init", "--quiet", "--bare", `--initial-branch=${defaultBranch}`, bare);
      const work = await mkdtemp(join(tmpdir(), "tern-fixture-"));
      try {
        await git(work, "init", "--quiet", `--initial-branch=${defaultBranch}`);
        await writeFiles(work, { "README.md": `# ${name}\n`, ...files });
        await git(work, "add", "-A");
        await git(work, "commit", "--quiet", "-m", "initial");
        await git(work, "push", "--quiet", bare, defaultBranch);
        for (const [branch, branchFiles] of Object.entries(repoOpts.branches ?? {})) {
          await git(work, "checkout", "--quiet", "-b", branch, defaultBranch);
          await writeFiles(work, branchFiles);
          await git(work, "add", "-A");
          await git(work, "commit", "--quiet", "--allow-empty", "-m", `on ${branch}`);
          await git(work, "push", "--quiet", bare, branch);
        }
      } finally {
        await rm(work, { recursive: true, force: true });
      }
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await rm(root, { recursive: true, force: true });
    },
  };
};
