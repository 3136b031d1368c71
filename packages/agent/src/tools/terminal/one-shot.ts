import type { Observation } from "@tern/core";
import { runOnce, type SandboxCallContext, toolStateDir } from "../run-once.ts";

/** Longest a command runs in a sandbox without the live terminal (its image has no tmux). */
const ONE_SHOT_TIMEOUT_SECONDS = 600;

/**
 * A command in a fresh bash, run once per action (run-once.ts), for a sandbox made from an image
 * older than the live terminal (no tmux in it): only the working directory carries over, and it is
 * stopped at a hard time limit. A conversation started before the upgrade keeps working so.
 */
export const runOneShot = async (
  command: string,
  timeoutSeconds: number | undefined,
  ctx: SandboxCallContext,
): Promise<{ text: string; isError: boolean; observation: Observation }> => {
  const timeoutSec = Math.ceil(Math.min(timeoutSeconds ?? ONE_SHOT_TIMEOUT_SECONDS, ONE_SHOT_TIMEOUT_SECONDS));
  const program = [
    `if [ -f ${toolStateDir}/cwd ]; then cd "$(cat ${toolStateDir}/cwd)" 2>/dev/null; fi`,
    command,
    "__tern_exit=$?",
    `pwd > ${toolStateDir}/cwd 2>/dev/null`,
    "exit $__tern_exit",
    "",
  ].join("\n");
  const r = await runOnce({ ...ctx, interpreter: "bash", program, cwd: ctx.workspaceDir, timeoutSec });
  const notes = [
    "[This sandbox predates the live terminal: the command ran in a fresh bash (only the working directory carries over).]",
    r.timedOut
      ? `[The command did not finish within ${timeoutSec} seconds and was stopped.]`
      : `[The command completed with exit code ${r.exitCode}.]`,
  ];
  if (r.cutBytes > 0) notes.push(`[Output was cut: ${r.cutBytes} bytes in the middle were left out.]`);
  const text = `${r.output}${r.output && !r.output.endsWith("\n") ? "\n" : ""}${notes.join("\n")}`;
  return {
    text,
    isError: r.timedOut,
    observation: {
      kind: "TerminalObservation",
      command,
      exit_code: r.timedOut ? -1 : r.exitCode,
      timed_out: r.timedOut,
      status: "one_shot",
      output_cut_bytes: r.cutBytes,
      content: [{ type: "text", text }],
      is_error: r.timedOut,
    },
  };
};
