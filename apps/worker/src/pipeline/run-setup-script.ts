import { RepositoryFaultError } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { sudoRefusalOf } from "@tern/sandbox";
import { type AcquiredSandbox, LostOwnership, lastLines, type StartContext, type Workspace } from "./context.ts";
import {
  handOverClone,
  isWorkspaceFact,
  PLACEMENT_FAILED,
  placeBeforeSetupScript,
  WORKSPACE_ROOT,
  workspaceFactsOf,
} from "./prepare-repository.ts";

const SETUP_SCRIPT = ".openhands/setup.sh";
const MAX_KEPT_OUTPUT = 64 * 1024;
/** What RUN_SCRIPT prints when the repository has no setup script: one exec finds out and runs it. */
const NO_SCRIPT = "tern: no setup script";

/**
 * Runs the script once per sandbox: under a lock, and remembered as done, so an attempt that
 * takes over from a dead worker waits for a run still going and does not start a second one.
 * Its output (stdout and stderr together) is kept in the sandbox, for that second attempt.
 *
 * The output goes to a file, not through a pipe: a process the script leaves in the background
 * would hold a pipe open and the run would never end. Such processes are code we did not write,
 * watching what comes next (the agent's commands, their environment): every process that started
 * after this run did, except this run and other copies of it (an attempt waiting on the lock, and its flock),
 * is ended before the agent starts. Only bash builtins there: a fork of ours would be a target.
 * Rounds, because a process may fork while we kill; one that outlasts them all fails the start.
 */
const RUN_SCRIPT = `
[ -f "$1" ] || { printf '%s' '${NO_SCRIPT}'; exit 0; }
starttime() { local s; { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1; s=\${s##*) }; set -- $s; REPLY=\${20}; }
# This run, or coreutils timeout running exactly this run (how the worker's execs are wrapped).
is_a_run() {
  local -a a; local i o=0
  { mapfile -d '' a < "/proc/$1/cmdline"; } 2>/dev/null || return 1
  [ "\${a[0]}" = timeout ] && [ "\${a[1]}" = -s ] && [ "\${a[3]}" = -k ] && o=6
  [ "\${#a[@]}" -eq $(( o + \${#me[@]} )) ] || return 1
  for (( i = 0; i < \${#me[@]}; i++ )); do [ "\${a[o + i]}" = "\${me[i]}" ] || return 1; done
}
# A later attempt waiting for the lock: flock, a child of a run (what the script leaves behind is a
# child of the script or of init, never of a run).
waits_for_lock() {
  local s; local -a a
  { mapfile -d '' a < "/proc/$1/cmdline"; } 2>/dev/null || return 1
  [ "\${#a[@]}" -eq 2 ] && [ "\${a[0]}" = flock ] && [ "\${a[1]}" = 9 ] || return 1
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
  s=\${s##*) }; set -- $s
  is_a_run "$2"
}
end_leftovers() {
  local since round d pid found; local -a me
  starttime $$ && since=$REPLY || return 1
  mapfile -d '' me < /proc/$$/cmdline
  for (( round = 0; round < 100; round++ )); do
    found=0
    for d in /proc/[0-9]*; do
      pid=\${d#/proc/}
      [ "$pid" = 1 ] || [ "$pid" = $$ ] || [ "$pid" = "$PPID" ] && continue
      starttime "$pid" || continue
      [ "$REPLY" -ge "$since" ] || continue
      is_a_run "$pid" && continue
      waits_for_lock "$pid" && continue
      kill -KILL "$pid" 2>/dev/null && found=1
    done
    [ "$found" = 0 ] && return 0
  done
  echo "tern: processes left by $1 could not be ended"; return 1
}
state="$HOME/.tern"; mkdir -p "$state"
exec 9>"$state/setup.lock"; flock 9
if [ -f "$state/setup.done" ]; then cat "$state/setup.log"; end_leftovers "$1"; exit; fi
# Stopped at the time limit: what it printed still comes back, for the error.
trap 'cat "$state/setup.log"; exit 124' TERM
bash "$1" >"$state/setup.log" 2>&1 9>&- </dev/null
rc=$?
trap - TERM
cat "$state/setup.log"
end_leftovers "$1" || exit 1
[ "$rc" -eq 0 ] && touch "$state/setup.done"
exit "$rc"
`;

/**
 * Whether RUNNING_SETUP_SCRIPT may run the repository's code: its entry must then be written before
 * (a takeover seeing it starts over in a fresh sandbox); otherwise it is carried by the next write.
 */
export const setupScriptMayRun = (workspace: Workspace): boolean =>
  !!workspace.repository && !workspace.fromSnapshot && workspace.hasSetupScript !== false;

/** RUNNING_SETUP_SCRIPT: `.openhands/setup.sh`, as the sandbox user, in the repository, within SETUP_SCRIPT_TIMEOUT. */
export const runSetupScript = async (
  ctx: StartContext,
  sandbox: AcquiredSandbox,
  workspace: Workspace,
): Promise<{ ran: boolean; output: string }> => {
  const { deps } = ctx;
  // An empty workspace made by PREPARING_REPOSITORY has no script: no exec to find that out.
  if (!workspace.repository) return { ran: false, output: "" };
  // A sandbox from a snapshot: its script ran, and succeeded, before the snapshot was taken.
  if (workspace.fromSnapshot) return { ran: false, output: "" };
  // PREPARING_REPOSITORY's exec saw none: no exec to find that out again.
  if (workspace.hasSetupScript === false) return { ran: false, output: "" };

  const limitSeconds = deps.config.SETUP_SCRIPT_TIMEOUT;
  const run = {
    timeoutMs: limitSeconds * 1000,
    maxOutputBytes: MAX_KEPT_OUTPUT + 4096,
  };
  const clone = workspace.unplaced;
  // A clone not in place yet is sent on this exec's stdin, unpacked and placed first (one exec for all).
  const r = clone
    ? (
        await handOverClone(ctx, sandbox, clone, (staged) => ({
          cmd: [
            "bash",
            "-c",
            `${placeBeforeSetupScript()}
cd "$3" || exit 1
${RUN_SCRIPT}`,
            "setup",
            SETUP_SCRIPT,
            `${WORKSPACE_ROOT}/${staged}`,
            workspace.dir,
          ],
          cwd: WORKSPACE_ROOT,
          ...run,
        }))
      ).result
    : await deps.sandboxes.exec(sandbox.ref, {
        cmd: ["bash", "-c", RUN_SCRIPT, "setup", SETUP_SCRIPT],
        cwd: workspace.dir,
        ...run,
      });
  let stdout = r.stdout;
  if (clone) {
    if (stdout.startsWith(PLACEMENT_FAILED)) {
      throw new Error(`placing the clone failed (exit ${r.exitCode ?? "none"}): ${lastLines(r.stderr, 3)}`);
    }
    // The facts come first, one a line; the script's own output follows.
    const lines = stdout.split("\n");
    let n = 0;
    while (n < lines.length && isWorkspaceFact(lines[n] ?? "")) n++;
    // Read by the stages after this one (the hook, the skills, the snapshot's key).
    Object.assign(workspace, workspaceFactsOf(lines.slice(0, n).join("\n")));
    delete workspace.unplaced;
    stdout = lines.slice(n).join("\n");
  }
  if (r.exitCode === 0 && stdout === NO_SCRIPT && !r.stderr) return { ran: false, output: "" };
  const output = stdout + r.stderr;
  if (!(await startTasksRepository(deps.db).setSetupOutput(ctx.task.id, ctx.attempt, output))) {
    throw new LostOwnership(ctx.task.id);
  }
  const tail = lastLines(output);
  const said = tail ? `; last output:\n${tail}` : "";
  if (r.timedOut) throw new RepositoryFaultError(`${SETUP_SCRIPT} did not finish within ${limitSeconds} s${said}`);
  if (r.exitCode !== 0) {
    // A script that needs root, in a sandbox that has none: say why, and where the way out is.
    const why = sudoRefusalOf(output, deps.sandboxes.containmentState?.().root);
    throw new RepositoryFaultError(`${SETUP_SCRIPT} exited with code ${r.exitCode}${why ? `; ${why}` : ""}${said}`);
  }
  ctx.log.info({ ms: r.durationMs }, "setup script done");
  return { ran: true, output };
};
