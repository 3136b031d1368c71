import type { SandboxDriver, SandboxRef } from "@tern/sandbox";
import { interruptTerminal } from "./tool.ts";

/** What stops a run's waits: the user's interrupt or the worker's shutdown, whichever comes. */
export const stopSignal = (deps: { interrupt?: AbortSignal; shutdown?: AbortSignal }): AbortSignal | undefined => {
  const signals = [deps.interrupt, deps.shutdown].filter((s): s is AbortSignal => s !== undefined);
  return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
};

/**
 * A terminal call cut short by the user's interrupt: Ctrl-C goes to the running command, and the
 * call's result is read back if it comes within a moment (`readBack` waits for it only so long).
 * Null when it does not: the call stays pending, and the run that continues the conversation reads
 * the result the sandbox keeps for it (it is never sent again).
 */
export const interruptedToolResult = async <R extends { pending?: boolean }>(
  sandboxes: Pick<SandboxDriver, "exec">,
  sandboxRef: SandboxRef,
  workspaceDir: string,
  readBack: () => Promise<R>,
): Promise<R | null> => {
  try {
    await interruptTerminal(sandboxes, sandboxRef, workspaceDir);
    const result = await readBack();
    return result.pending ? null : result;
  } catch {
    return null;
  }
};
