import type { Logger } from "@tern/core";

/**
 * Ordered shutdown for one process: what was opened last is closed first (workers before the
 * queues they use, queues before Redis, everything before Postgres). Each step runs once; a
 * failing step is logged and the next one still runs.
 */
export const createShutdownManager = (logger: Logger) => {
  const steps: { name: string; run: () => Promise<unknown> }[] = [];
  let running: Promise<void> | null = null;
  return {
    register(name: string, run: () => Promise<unknown>): void {
      steps.push({ name, run });
    },
    run(reason: string): Promise<void> {
      running ??= (async () => {
        logger.info({ reason }, "worker shutting down");
        for (const step of [...steps].reverse()) {
          try {
            await step.run();
          } catch (err) {
            logger.warn(
              { step: step.name, err: err instanceof Error ? err.message : String(err) },
              "shutdown step failed",
            );
          }
        }
        logger.info("worker stopped");
      })();
      return running;
    },
  };
};
