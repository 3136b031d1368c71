/** The first of `signals` to abort (undefined ones left out); undefined when none is given. */
export const anySignal = (...signals: (AbortSignal | undefined)[]): AbortSignal | undefined => {
  const given = signals.filter((s): s is AbortSignal => s !== undefined);
  return given.length > 1 ? AbortSignal.any(given) : given[0];
};

/** What stops a run's waits: the user's interrupt or the worker's shutdown, whichever comes. */
export const stopSignal = (deps: { interrupt?: AbortSignal; shutdown?: AbortSignal }): AbortSignal | undefined =>
  anySignal(deps.interrupt, deps.shutdown);

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
