/**
 * Runs batches taken off a queue, at most `maxInFlight` at once, each taken at the end of the turn
 * of the event loop in which it was asked for: what callers ask for in one turn goes together.
 * `take` answers the next batch, or null when nothing waiting may go now; `run` settles a batch
 * (it never rejects: its callers get their errors). Call `schedule` after each push.
 */
export const turnPump = <B>(opts: {
  maxInFlight: number;
  waiting: () => number;
  take: () => B | null;
  run: (batch: B) => Promise<void>;
}) => {
  let inFlight = 0;
  let scheduled = false;

  const pump = () => {
    scheduled = false;
    while (inFlight < opts.maxInFlight && opts.waiting() > 0) {
      const batch = opts.take();
      if (batch === null) return;
      inFlight++;
      void opts.run(batch).finally(() => {
        inFlight--;
        schedule();
      });
    }
  };

  const schedule = () => {
    if (scheduled || opts.waiting() === 0 || inFlight >= opts.maxInFlight) return;
    scheduled = true;
    setImmediate(pump);
  };

  return { schedule, inFlight: () => inFlight };
};
