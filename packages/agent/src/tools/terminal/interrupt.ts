/** What stops a run's waits: the user's interrupt or the worker's shutdown, whichever comes. */
export const stopSignal = (deps: { interrupt?: AbortSignal; shutdown?: AbortSignal }): AbortSignal | undefined => {
  const signals = [deps.interrupt, deps.shutdown].filter((s): s is AbortSignal => s !== undefined);
  return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
};

/**
 * A terminal call cut short by the user's interrupt: Ctrl-C goes to the running command, and the
 * call's result is read back if it comes within a moment (`readBack` does both in one exec, and
 * waits only so long). Null when it does not come: the call stays pending, and the run that
 * continues the conversation reads the result the sandbox keeps for it (it is never sent again).
 */
export const interruptedToolResult = async <R extends { pending?: boolean }>(
  readBack: () => Promise<R>,
  onError: (err: unknown) => void,
): Promise<R | null> => {
  try {
    const result = await readBack();
    return result.pending ? null : result;
  } catch (err) {
    onError(err);
    return null;
  }
};
