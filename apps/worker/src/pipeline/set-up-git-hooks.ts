import type { RepositoryHook } from "@tern/core";
import { type AcquiredSandbox, execChecked, type StartContext, type Workspace } from "./context.ts";

export const PRE_COMMIT_SCRIPT = ".openhands/pre-commit.sh";
const MARKER = "# tern: chained pre-commit hook";

/**
 * The hook runs a hook that was there before (kept as pre-commit.local) and then a copy of the
 * repository's script; a commit fails when either fails. Installing twice changes nothing.
 */
const INSTALL_SCRIPT = `
set -e
[ -f "$1" ] || { echo "none"; exit 0; }
hooks=$(git rev-parse --git-path hooks)
mkdir -p "$hooks"
if [ -e "$hooks/pre-commit" ] && ! grep -qF '${MARKER}' "$hooks/pre-commit"; then
  mv "$hooks/pre-commit" "$hooks/pre-commit.local"
fi
cp "$1" "$hooks/pre-commit.openhands"
cat > "$hooks/pre-commit" <<'HOOK'
#!/bin/sh
${MARKER} (installed from .openhands/pre-commit.sh)
hooks_dir=$(dirname "$0")
if [ -x "$hooks_dir/pre-commit.local" ]; then
  "$hooks_dir/pre-commit.local" "$@" || exit $?
fi
exec bash "$hooks_dir/pre-commit.openhands" "$@"
HOOK
chmod +x "$hooks/pre-commit" "$hooks/pre-commit.openhands"
echo "installed"
`;

/**
 * What the conversation records of an installed hook (GET /app-conversations/{id}/hooks), in
 * OpenHands' hook shape: git's `pre-commit` event, on every commit, running the repository's script.
 */
const preCommitHook: RepositoryHook = {
  event_type: "pre-commit",
  matchers: [{ matcher: "*", hooks: [{ type: "command", command: PRE_COMMIT_SCRIPT, timeout: null, async: false }] }],
};

/**
 * SETTING_UP_GIT_HOOKS: `.openhands/pre-commit.sh` as the pre-commit hook, chaining an existing one.
 * Returns the hooks installed, for the conversation to keep.
 */
export const setUpGitHooks = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<RepositoryHook[]> => {
  // An empty workspace has no .openhands/pre-commit.sh, and the clone's exec said whether a repository has one.
  if (!workspace.repository || workspace.hasPreCommitScript === false) return [];
  const r = await execChecked(
    ctx,
    sandbox.ref,
    { cmd: ["bash", "-c", INSTALL_SCRIPT, "hooks", PRE_COMMIT_SCRIPT], cwd: workspace.dir },
    "installing the pre-commit hook",
    "repository_fault",
  );
  return r.stdout.trim() === "installed" ? [preCommitHook] : [];
};
