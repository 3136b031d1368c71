import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SandboxDriver, SandboxRef } from "@tern/sandbox";
import type { ResolvedAccess } from "./git-access.ts";
import { gitEnvFor, runGit } from "./run-git.ts";

const PUSH_TIMEOUT_MS = 5 * 60_000;
const BUNDLE = "/tmp/tern-push.bundle";
const SHALLOW_MARK = "tern: shallow commits follow";

/**
 * In the sandbox, as its user: the branch as a git bundle (a file of its commits and objects),
 * and the shallow boundary of the clone it grew from, so the worker can hold the commits without
 * the history the shallow clone never had. No credential is needed or present here.
 */
const BUNDLE_SCRIPT = `
set -u
b="$1"; out="$2"
git rev-parse --verify --quiet "refs/heads/$b^{commit}" >/dev/null || { echo "tern: no such branch"; exit 3; }
rm -f "$out"
git bundle create "$out" "refs/heads/$b" >/dev/null 2>&1 || { echo "tern: the bundle could not be made"; exit 4; }
echo "${SHALLOW_MARK}"
f=$(git rev-parse --git-path shallow)
[ -f "$f" ] && cat "$f"
exit 0
`;

export class PushRefused extends Error {
  override name = "PushRefused";
}

/**
 * Takes `branch`'s commits out of the sandbox (a bundle, through the driver's archive read) and
 * pushes them from the worker with the user's token. Never forces: a remote branch with commits
 * the sandbox lacks refuses the push. Errors name the provider, never the token.
 */
export const pushFromSandbox = async (
  sandboxes: Pick<SandboxDriver, "exec" | "download">,
  ref: SandboxRef,
  input: { workspaceDir: string; branch: string; fullName: string; access: ResolvedAccess },
): Promise<{ commit: string }> => {
  const { access, branch } = input;
  const made = await sandboxes.exec(ref, {
    cmd: ["bash", "-c", BUNDLE_SCRIPT, "bundle", branch, BUNDLE],
    cwd: input.workspaceDir,
    timeoutMs: 120_000,
  });
  if (made.exitCode === 3) throw new PushRefused(`there is no branch '${branch}' in the workspace repository`);
  if (made.exitCode !== 0) throw new PushRefused(`the branch '${branch}' could not be bundled for the push`);
  const shallow = (made.stdout.split(SHALLOW_MARK)[1] ?? "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(l));
  const bundle = await sandboxes.download(ref, BUNDLE).catch((err: Error) => {
    throw new PushRefused(`the branch's commits could not be read out of the sandbox: ${err.message}`);
  });
  if (!bundle) throw new PushRefused("the branch's commits could not be read out of the sandbox");

  const root = await mkdtemp(join(tmpdir(), "tern-push-"));
  try {
    const repo = join(root, "repo.git");
    const local = gitEnvFor({ ...access, token: null }, root, { allowFile: true });
    await runGit(["init", "--quiet", "--bare", repo], { cwd: root, env: local, timeoutMs: 30_000 });
    if (shallow.length) await writeFile(join(repo, "shallow"), `${shallow.join("\n")}\n`);
    const file = join(root, `${randomBytes(6).toString("hex")}.bundle`);
    await writeFile(file, bundle);
    // Every object is checked (transfer.fsckObjects): the bundle was made where untrusted code runs.
    const fetched = await runGit(["fetch", "--quiet", file, `refs/heads/${branch}:refs/heads/${branch}`], {
      cwd: repo,
      env: local,
      timeoutMs: PUSH_TIMEOUT_MS,
    });
    if (fetched.code !== 0) {
      throw new PushRefused(
        `the branch's commits from the sandbox are not a valid bundle: ${lastLine(fetched.stderr)}`,
      );
    }
    const commit = (
      await runGit(["rev-parse", `refs/heads/${branch}`], { cwd: repo, env: local, timeoutMs: 10_000 })
    ).stdout.trim();
    const env = gitEnvFor(access, root);
    const pushed = await runGit(
      ["push", "--quiet", "--porcelain", access.url, `refs/heads/${branch}:refs/heads/${branch}`],
      {
        cwd: repo,
        env,
        timeoutMs: PUSH_TIMEOUT_MS,
        secrets: [access.token],
      },
    );
    if (pushed.code !== 0)
      throw new PushRefused(pushFailure(input.fullName, access, `${pushed.stderr}\n${pushed.stdout}`));
    return { commit };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
};

const lastLine = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-2)
    .join(" / ")
    .slice(0, 400);

const pushFailure = (fullName: string, access: ResolvedAccess, output: string): string => {
  const { provider } = access;
  if (/non-fast-forward|fetch first|\[rejected\]|rejected/i.test(output) && !/40[134]/.test(output)) {
    return `${provider} refused the push: the remote branch has commits the workspace's branch lacks (pull and merge or rebase first, or push another branch)`;
  }
  if (
    /returned error: 40[134]|Authentication failed|could not read Username|terminal prompts disabled|not found/i.test(
      output,
    )
  ) {
    return access.token
      ? `${provider} refused the push to ${fullName}: the ${provider} token was refused or cannot write to it`
      : `${provider} refused the push to ${fullName}: no ${provider} token (add one with POST /api/v1/git/providers)`;
  }
  return `the push to ${fullName} on ${provider} failed: ${lastLine(output)}`;
};
