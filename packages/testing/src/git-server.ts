import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface GitServerOptions {
  /** Address to listen on: the sandbox network's gateway, so containers reach it. */
  host: string;
  /** When set, every request needs HTTP Basic auth whose password is this token. */
  token?: string;
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

const authorized = (req: IncomingMessage, token: string | undefined): boolean => {
  if (!token) return true;
  const header = req.headers.authorization ?? "";
  if (!header.startsWith("Basic ")) return false;
  const decoded = Buffer.from(header.slice(6), "base64").toString("utf8");
  return decoded.slice(decoded.indexOf(":") + 1) === token;
};

/** Smart HTTP through `git http-backend` (CGI): the real protocol a clone in a sandbox speaks. */
const serveCgi = (root: string, req: IncomingMessage, res: ServerResponse) => {
  const url = new URL(req.url ?? "/", "http://x");
  const child = spawn("git", ["http-backend"], {
    // Its stderr is not read: ignored, so a chatty backend never blocks on a full pipe.
    stdio: ["pipe", "pipe", "ignore"],
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: "1",
      GIT_CONFIG_NOSYSTEM: "1",
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
    const ok = authorized(req, opts.token);
    requests.push(`${req.method} ${req.url} ${ok ? "authorized" : "unauthorized"}`);
    if (!ok) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="fixture"' });
      res.end("unauthorized\n");
      return;
    }
    serveCgi(root, req, res);
  });
  server.listen(0, opts.host);
  await once(server, "listening");
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;

  return {
    url: `http://${opts.host}:${port}`,
    root,
    requests,
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
