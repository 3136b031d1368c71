import { AppError } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { type AcquiredSandbox, LostOwnership, lastLines, type StartContext, type Workspace } from "./context.ts";

export const SETUP_SCRIPT = ".openhands/setup.sh";
const MAX_KEPT_OUTPUT = 64 * 1024;
/** What RUN_SCRIPT prints when the repository has no setup script: one exec finds out and runs it. */
const NO_SCRIPT = "tern: no setup script";

/**
 * Runs the script once per sandbox: under a lock, and remembered as done, so an attempt that
 * takes over from a dead worker waits for a run still going and does not start a second one.
 * Its output (stdout and stderr together) is also kept in the sandbox, for that second attempt.
 */
const RUN_SCRIPT = `
[ -f "$1" ] || { printf '%s' '${NO_SCRIPT}'; exit 0; }
state="$HOME/.tern"; mkdir -p "$state"
exec 9>"$state/setup.lock"; flock 9
if [ -f "$state/setup.done" ]; then cat "$state/setup.log"; exit 0; fi
set -o pipefail
bash "$1" 2>&1 | tee "$state/setup.log"
rc=$?
[ "$rc" -eq 0 ] && touch "$state/setup.done"
exit "$rc"
`;

/** RUNNING_SETUP_SCRIPT: `.openhands/setup.sh`, as the sandbox user, in the repository, within SETUP_SCRIPT_TIMEOUT. */
export const runSetupScript = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<{ ran: boolean; output: string }> => {
  const { deps } = ctx;
  // An empty workspace made by PREPARING_REPOSITORY has no script: no exec to find that out.
  if (!workspace.repository) return { ran: false, output: "" };

  const limitSeconds = deps.config.SETUP_SCRIPT_TIMEOUT;
  const r = await deps.sandboxes.exec(sandbox.containerId, {
    cmd: ["bash", "-c", RUN_SCRIPT, "setup", SETUP_SCRIPT],
    cwd: workspace.dir,
    timeoutMs: limitSeconds * 1000,
    maxOutputBytes: MAX_KEPT_OUTPUT,
  });
  if (r.exitCode === 0 && r.stdout === NO_SCRIPT && !r.stderr) return { ran: false, output: "" };
  const output = r.stdout + r.stderr;
  if (!(await startTasksRepository(deps.db).setSetupOutput(ctx.task.id, ctx.attempt, output))) {
    throw new LostOwnership(ctx.task.id);
  }
  const tail = lastLines(output);
  const said = tail ? `; last output:\n${tail}` : "";
  if (r.timedOut)
    throw new AppError("validation_failed", `${SETUP_SCRIPT} did not finish within ${limitSeconds} s${said}`);
  if (r.exitCode !== 0)
    throw new AppError("validation_failed", `${SETUP_SCRIPT} exited with code ${r.exitCode}${said}`);
  ctx.log.info({ ms: r.durationMs }, "setup script done");
  return { ran: true, output };
};
