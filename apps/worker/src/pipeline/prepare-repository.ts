import { AppError } from "@tern/core";
import type { ExecOptions } from "@tern/sandbox";
import { type AcquiredSandbox, execChecked, lastLines, type StartContext, type Workspace } from "./context.ts";
import { cloneUrlOf, gitAuthEnv, type RepositorySpec, repositorySpecOf } from "./repository-spec.ts";
import { PRE_COMMIT_SCRIPT } from "./set-up-git-hooks.ts";
import { skillGlobs } from "./skills.ts";

const EMPTY_WORKSPACE = "/workspace/project";
const CLONE_TIMEOUT_MS = 10 * 60_000;

/**
 * Clones into a fresh directory next to the workspace and moves it in place only once complete,
 * so a clone cut short (its worker died) is never mistaken for a finished one by the next attempt.
 * Arguments arrive as positional parameters: nothing from the request is spliced into the script.
 */
const CLONE_SCRIPT = `
set -u
url="$1"; dest="$2"; branch="$3"
if [ -d "$dest/.git" ]; then echo "already cloned"; exit 0; fi
tmp=$(mktemp -d "$(dirname "$dest")/.clone-XXXXXX")
if [ -n "$branch" ]; then
  git clone --quiet --depth 1 --single-branch --branch "$branch" -- "$url" "$tmp" || { rc=$?; rm -rf "$tmp"; exit $rc; }
else
  git clone --quiet --depth 1 --single-branch -- "$url" "$tmp" || { rc=$?; rm -rf "$tmp"; exit $rc; }
fi
if ! mv -T "$tmp" "$dest" 2>/dev/null; then rm -rf "$tmp"; [ -d "$dest/.git" ] || exit 1; fi
`;

/** The agent's commits need an identity; set per repository, never with credentials. */
const IDENTITY_SCRIPT = `
cd "$1" && git config user.name >/dev/null || git config user.name "openhands"
cd "$1" && git config user.email >/dev/null || git config user.email "openhands@all-hands.dev"
`;

const INIT_SCRIPT = `
set -e
mkdir -p "$1"; cd "$1"
[ -d .git ] || git init --quiet --initial-branch=main
`;

/** What the warm pool runs in each container ahead, so a start without a repository needs no exec. */
export const emptyWorkspaceWarmUp = (): ExecOptions => ({
  cmd: ["bash", "-c", `${INIT_SCRIPT}\n${IDENTITY_SCRIPT}`, "init", EMPTY_WORKSPACE],
});

const HAS_PRE_COMMIT = "tern: the repository has a pre-commit script";
const HAS_SKILLS = "tern: the repository has skills";

/**
 * The clone, the identity, and whether there is a pre-commit script or skills to read, in one exec (each
 * exec costs tens of ms of the engine's time): the clone runs in a subshell, so its early exit
 * ("already cloned") ends only that part.
 */
const CLONE_THEN_IDENTITY_SCRIPT = `( ${CLONE_SCRIPT} ) || exit $?
set -- "$2"
${IDENTITY_SCRIPT}
rc=$?; [ "$rc" -eq 0 ] || exit "$rc"
cd "$1" || exit 1
if [ -f "${PRE_COMMIT_SCRIPT}" ]; then echo "${HAS_PRE_COMMIT}"; fi
for f in ${skillGlobs.join(" ")}; do if [ -f "$f" ]; then echo "${HAS_SKILLS}"; break; fi; done
exit 0`;

/** Git's words for the faults that are the user's to fix; anything else is worth retrying. */
const cloneFailure = (spec: RepositorySpec, output: string): Error => {
  if (/Remote branch .* not found|couldn't find remote ref/i.test(output)) {
    return new AppError("not_found", `branch '${spec.branch}' not found in ${spec.fullName}`);
  }
  if (/repository '.*' not found|Repository not found|returned error: 404/i.test(output)) {
    return new AppError("not_found", `repository ${spec.fullName} not found`);
  }
  if (/Authentication failed|could not read Username|returned error: 40[13]|terminal prompts disabled/i.test(output)) {
    return new AppError("forbidden", `access to ${spec.fullName} was denied (check the server's GIT_TOKEN)`);
  }
  return new Error(`git clone of ${spec.fullName} failed: ${lastLines(output, 3)}`);
};

/** PREPARING_REPOSITORY: a shallow clone of the requested branch, or an empty git repository. */
export const prepareRepository = async (ctx: StartContext, sandbox: AcquiredSandbox): Promise<Workspace> => {
  const { deps } = ctx;
  // Validated again here, whatever the API accepted: the worker may be fed by other producers.
  const spec = repositorySpecOf(ctx.task.request);
  if (!spec) {
    if (sandbox.emptyWorkspaceReady) return { dir: EMPTY_WORKSPACE, repository: null };
    // One exec: each costs tens of ms of the engine's time, and this is the whole stage here.
    await execChecked(ctx, sandbox.containerId, emptyWorkspaceWarmUp(), "git init");
    return { dir: EMPTY_WORKSPACE, repository: null };
  }
  const dir = `/workspace/${spec.name}`;
  const url = cloneUrlOf(spec, deps.config);
  const r = await deps.sandboxes.exec(sandbox.containerId, {
    cmd: ["bash", "-c", CLONE_THEN_IDENTITY_SCRIPT, "clone", url, dir, spec.branch ?? ""],
    env: gitAuthEnv(spec, deps.config.GIT_TOKEN),
    timeoutMs: CLONE_TIMEOUT_MS,
    maxOutputBytes: 64 * 1024,
  });
  if (r.timedOut) throw new Error(`git clone of ${spec.fullName} did not finish in ${CLONE_TIMEOUT_MS / 1000} s`);
  if (r.exitCode !== 0) throw cloneFailure(spec, `${r.stderr}\n${r.stdout}`);
  return {
    dir,
    repository: spec,
    hasPreCommitScript: r.stdout.includes(HAS_PRE_COMMIT),
    hasSkills: r.stdout.includes(HAS_SKILLS),
  };
};
