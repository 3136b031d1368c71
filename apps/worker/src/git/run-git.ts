import { spawn } from "node:child_process";
import type { GitProvider } from "@tern/core";

/**
 * Git on the worker, for the clone and the push: the only git process that ever holds a user's
 * token. Nothing of the token is in its command line (ps shows those to every user of the host)
 * or in any file: it is an http.extraHeader passed in this one process's environment
 * (GIT_CONFIG_COUNT/KEY/VALUE), scoped to the URL of the repository, and the process reads no
 * configuration but ours (no system or global file, no credential helper, no hooks).
 */

/** The user name each provider expects beside a token in HTTP Basic auth. */
const tokenUser: Record<GitProvider, string> = {
  github: "x-access-token",
  gitlab: "oauth2",
  bitbucket: "x-token-auth",
};

/** The Authorization header's value for a provider's token: git's own (extraHeader) and the ref lookup's. */
export const gitAuthorization = (provider: GitProvider, token: string): string =>
  `Basic ${Buffer.from(`${tokenUser[provider]}:${token}`).toString("base64")}`;

const basicAuthHeader = (provider: GitProvider, token: string): string =>
  `Authorization: ${gitAuthorization(provider, token)}`;

export interface GitAccess {
  /** The repository's URL, as the remote git host serves it (never with credentials in it). */
  url: string;
  provider: GitProvider;
  token: string | null;
  /** Plain http allowed (an operator's own URL, or GIT_ALLOW_PRIVATE_HOSTS). */
  allowHttp: boolean;
}

/** `-c` settings as environment: protocols, object checks, redirects and the token's header. */
export const gitEnvFor = (
  access: GitAccess,
  home: string,
  /** Local files as a transport (a bundle the worker wrote): only for a process without the token. */
  opts: { allowFile?: boolean } = {},
): Record<string, string> => {
  const pairs: [string, string][] = [
    // Only https (or http where configured): no ext::, file://, ssh or git:// from a URL or a redirect.
    ["protocol.allow", "never"],
    ["protocol.https.allow", "always"],
    ...(access.allowHttp ? ([["protocol.http.allow", "always"]] as [string, string][]) : []),
    ...(opts.allowFile && !access.token ? ([["protocol.file.allow", "always"]] as [string, string][]) : []),
    // Every object received is checked (a malformed tree could attack the next git that reads it).
    ["transfer.fsckObjects", "true"],
    // A redirect could send the token's header to another host: none is followed.
    ["http.followRedirects", "false"],
    ["credential.helper", ""],
    ["core.hooksPath", "/dev/null"],
    ["core.askPass", ""],
    ["submodule.recurse", "false"],
    ["advice.detachedHead", "false"],
  ];
  if (access.token) {
    // Scoped to the repository's URL: sent to that prefix only, never to a URL a server names.
    pairs.push([`http.${access.url}.extraHeader`, basicAuthHeader(access.provider, access.token)]);
  }
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: home,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: "/bin/false",
    // A repository's LFS pointers stay pointers: no smudge filter talks to an LFS server the repository names.
    GIT_LFS_SKIP_SMUDGE: "1",
    GIT_CONFIG_COUNT: String(pairs.length),
  };
  pairs.forEach(([k, v], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = k;
    env[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return env;
};

export interface GitResult {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

const MAX_OUTPUT = 64 * 1024;

/** Runs git; its output with every occurrence of `secrets` removed (a server could echo a header back). */
export const runGit = (
  args: string[],
  opts: { cwd: string; env: Record<string, string>; timeoutMs: number; secrets?: (string | null)[] },
): Promise<GitResult> =>
  new Promise((resolve, reject) => {
    const child = spawn("git", args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      if (stdout.length < MAX_OUTPUT) stdout += d.toString("utf8");
    });
    child.stderr.on("data", (d: Buffer) => {
      if (stderr.length < MAX_OUTPUT) stderr += d.toString("utf8");
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, opts.timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: redact(stdout, opts.secrets), stderr: redact(stderr, opts.secrets), timedOut });
    });
  });

const redact = (text: string, secrets: (string | null)[] = []): string => {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join("<token>");
  return out;
};
