import type { ExecOptions, ExecResult } from "@tern/sandbox";
import { cloneOnWorker, type WorkerClone } from "../git/clone.ts";
import { resolveGitAccess } from "../git/git-access.ts";
import { type AcquiredSandbox, checked, execChecked, type StartContext, type Workspace } from "./context.ts";
import type { SnapshotPlan } from "./repo-snapshot.ts";
import { repositorySpecOf } from "./repository-spec.ts";
import { PRE_COMMIT_SCRIPT } from "./set-up-git-hooks.ts";
import { hasSkillSourcesScript } from "./skills.ts";

export const EMPTY_WORKSPACE = "/workspace/project";
export const WORKSPACE_ROOT = "/workspace";

/**
 * Unpacks the tree the worker sends on stdin (under a name of its own, in the workspace root), then
 * moves it into place only once complete, so a tree cut short (its worker died) is never mistaken for
 * a finished one by the next attempt. Arguments arrive as positional parameters: nothing from the
 * request is spliced into the script.
 */
const PLACE_SCRIPT = `
set -u
src="$1"; dest="$2"
tar -x -f - -C "\${src%/*}" --no-same-owner || exit 1
if [ -d "$dest/.git" ]; then rm -rf "$src"; echo "already cloned"; exit 0; fi
if ! mv -T "$src" "$dest" 2>/dev/null; then rm -rf "$src"; [ -d "$dest/.git" ] || exit 1; fi
`;

/**
 * The agent's commits need an identity; set per repository (where none is set at any level, the
 * image's own included), never with credentials. One git process reads both; when both are missing
 * (the usual case) the section is appended to the repository's config, which our own clone or init
 * wrote: no git process for the writes (each costs milliseconds of a start's critical path).
 */
const IDENTITY_SCRIPT = `
cd "$1" || exit 1
ids=$'\\n'"$(git config --get-regexp '^user\\.(name|email)$' || true)"
case "$ids" in *$'\\n'"user.name "*) name=1 ;; *) name= ;; esac
case "$ids" in *$'\\n'"user.email "*) email=1 ;; *) email= ;; esac
if [ -z "$name$email" ] && [ -f .git/config ] && [ ! -L .git/config ]; then
  printf '[user]\\n\\tname = openhands\\n\\temail = openhands@all-hands.dev\\n' >> .git/config || exit 1
else
  [ -n "$name" ] || git config user.name "openhands" || exit 1
  [ -n "$email" ] || git config user.email "openhands@all-hands.dev" || exit 1
fi
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
const SETUP_HASH = "tern: setup script ";
const NO_SETUP = "tern: the repository has no setup script";

/**
 * After the tree is placed (its destination is "$2"): the identity, then the facts workspaceFactsOf
 * reads (a pre-commit script, the setup script's hash, skills to read).
 */
const IDENTITY_AND_FACTS_SCRIPT = `set -- "$2"
${IDENTITY_SCRIPT}
rc=$?; [ "$rc" -eq 0 ] || exit "$rc"
cd "$1" || exit 1
if [ -f "${PRE_COMMIT_SCRIPT}" ]; then echo "${HAS_PRE_COMMIT}"; fi
if [ -f .openhands/setup.sh ]; then echo "${SETUP_HASH}$(git hash-object .openhands/setup.sh)"; else echo "${NO_SETUP}"; fi
${hasSkillSourcesScript(HAS_SKILLS)}
exit 0`;

/**
 * The tree in place, the identity, and whether there is a pre-commit script or skills to read, in one
 * exec (each exec costs tens of ms of the engine's time): the move runs in a subshell, so its early
 * exit ("already cloned") ends only that part.
 */
const PLACE_THEN_IDENTITY_SCRIPT = `( ${PLACE_SCRIPT} ) || exit $?
${IDENTITY_AND_FACTS_SCRIPT}`;

/**
 * The clone on the worker, begun while the sandbox is made (it needs none): PREPARING_REPOSITORY
 * hands the tree over once both are there. Null when there is nothing to clone (no repository, or a
 * start from a snapshot). A failure (an unknown repository or branch, an invalid request) is the
 * stage's, thrown when PREPARING_REPOSITORY takes the clone; the caller discards a clone never taken.
 */
export const beginClone = (ctx: StartContext, snapshot: SnapshotPlan | null): Promise<WorkerClone> | null => {
  if (snapshot?.hit) return null;
  let spec: ReturnType<typeof repositorySpecOf>;
  try {
    spec = repositorySpecOf(ctx.task.request);
  } catch {
    // PREPARING_REPOSITORY says why, as always.
    return null;
  }
  if (!spec) return null;
  const { fullName, branch, provider } = spec;
  const cloning = (async () => {
    const access = snapshot?.access ?? (await resolveGitAccess(ctx.deps, ctx.task.userId, provider, fullName));
    return cloneOnWorker({ fullName, branch, access });
  })();
  // Taken (and its failure thrown) by PREPARING_REPOSITORY; never an unhandled rejection before that.
  cloning.catch(() => undefined);
  return cloning;
};

/**
 * What the tree's own exec says (the pre-commit script, the setup script's hash, skills) into a
 * workspace: from PREPARING_REPOSITORY's exec, or from the setup script's when that one placed the tree.
 */
export const workspaceFactsOf = (
  stdout: string,
): Pick<Workspace, "hasPreCommitScript" | "hasSkills" | "hasSetupScript" | "setupHash"> => ({
  hasPreCommitScript: stdout.includes(HAS_PRE_COMMIT),
  hasSkills: stdout.includes(HAS_SKILLS),
  ...(stdout.includes(NO_SETUP) ? { hasSetupScript: false } : {}),
  ...setupHashOf(stdout),
});

/**
 * The tree staged by the hand-over moved into place with the identity, printing what workspaceFactsOf
 * reads; for the setup script's exec to run first, with its arguments (staged directory, destination).
 * Its own output goes nowhere but the facts: the setup script's output follows them.
 */
export const placeBeforeSetupScript = (): string => `( set -- "$2" "$3"
( ${PLACE_SCRIPT} ) >/dev/null || exit $?
${IDENTITY_AND_FACTS_SCRIPT} ) || { echo "${PLACEMENT_FAILED}"; exit 1; }`;

/** What the setup script's exec prints when placing the tree before it failed (a passing fault). */
export const PLACEMENT_FAILED = "tern: placing the clone failed";

/** Lines of workspaceFactsOf's markers, which come before the setup script's own output. */
export const isWorkspaceFact = (line: string): boolean =>
  [HAS_PRE_COMMIT, HAS_SKILLS, NO_SETUP].includes(line) || line.startsWith(SETUP_HASH);

/** PREPARING_REPOSITORY: a shallow clone of the requested branch, or an empty git repository. */
export const prepareRepository = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  /** What planSnapshot found: a start from a snapshot has its tree in place already. */
  snapshot: SnapshotPlan | null = null,
  /** The clone beginClone started beside the sandbox's making; else it is made here. */
  cloning: Promise<WorkerClone> | null = null,
): Promise<Workspace> => {
  const { deps } = ctx;
  // Validated again here, whatever the API accepted: the worker may be fed by other producers.
  const spec = repositorySpecOf(ctx.task.request);
  if (!spec) {
    if (sandbox.emptyWorkspaceReady) return { dir: EMPTY_WORKSPACE, repository: null };
    // One exec: each costs tens of ms of the engine's time, and this is the whole stage here.
    await execChecked(ctx, sandbox.ref, emptyWorkspaceWarmUp(), "git init");
    return { dir: EMPTY_WORKSPACE, repository: null };
  }
  const dir = `${WORKSPACE_ROOT}/${spec.name}`;
  if (snapshot?.hit) {
    // Cloned, identified and set up when the snapshot was taken: no exec here. The hook and skill
    // stages take what the snapshot recorded of them (else run only when the tree has what they need).
    return {
      dir,
      repository: spec,
      commit: snapshot.hit.commit,
      fromSnapshot: true,
      hasPreCommitScript: snapshot.hit.hasPreCommit,
      hasSkills: snapshot.hit.hasSkills,
    };
  }
  // On the worker, never in the sandbox: the token (the user's own, or the shared one) stays in
  // the worker's git process, and the sandbox gets the tree (no credential in a sandbox).
  const clone = await (cloning ??
    (async () => {
      const access = snapshot?.access ?? (await resolveGitAccess(deps, ctx.task.userId, spec.provider, spec.fullName));
      return cloneOnWorker({ fullName: spec.fullName, branch: spec.branch, access });
    })());
  // With a setup script, its exec places the tree first (one exec fewer; once RUNNING_SETUP_SCRIPT is
  // written, a takeover starts over in a fresh sandbox whatever was placed).
  if (await clone.holds(".openhands/setup.sh")) {
    // Sent with the setup script's exec; a tree too large to send is this stage's fault all the same.
    await clone.checkSize(deps.config.GIT_CLONE_MAX_MB * 1024 * 1024);
    return { dir, repository: spec, commit: clone.commit, unplaced: clone };
  }
  const { result } = await handOverClone(ctx, sandbox, clone, (staged) => ({
    cmd: ["bash", "-c", PLACE_THEN_IDENTITY_SCRIPT, "place", `${WORKSPACE_ROOT}/${staged}`, dir],
    maxOutputBytes: 64 * 1024,
  }));
  const r = checked(result, "placing the clone");
  return { dir, repository: spec, commit: clone.commit, ...workspaceFactsOf(r.stdout) };
};

/**
 * The clone sent into the sandbox on the stdin of the exec `execFor` makes (its script unpacks it
 * under `${WORKSPACE_ROOT}/${staged}` first), and the worker's copy removed.
 */
export const handOverClone = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  clone: WorkerClone,
  execFor: (staged: string) => ExecOptions,
): Promise<{ result: ExecResult }> => {
  const started = Date.now();
  const { result, bytes } = await clone.handOverIn(
    ctx.deps.sandboxes,
    sandbox.ref,
    ctx.deps.config.GIT_CLONE_MAX_MB * 1024 * 1024,
    execFor,
  );
  ctx.log.info(
    { commit: clone.commit, bytes, ms: Date.now() - started, token: clone.tokenSource },
    "cloned on the worker and handed to the sandbox",
  );
  return { result };
};

const setupHashOf = (stdout: string): { setupHash?: string } => {
  const line = stdout.split("\n").find((l) => l.startsWith(SETUP_HASH));
  const hash = line?.slice(SETUP_HASH.length).trim();
  return hash && /^[0-9a-f]{40,64}$/.test(hash) ? { setupHash: hash } : {};
};
