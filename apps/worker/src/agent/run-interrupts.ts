import type { Logger } from "@tern/core";
import { listenForRunInterrupts, type RunStopKind } from "@tern/queue";
import type { Redis } from "ioredis";

/**
 * The runs this worker holds, by conversation, each with the AbortControllers that the user's
 * interrupt aborts (runAgent's `interrupt`) and that a pause aborts (runAgent's `pause`: the MCP
 * servers' start-up).
 */
export interface RunInterrupts {
  /** A run begins here: its signals, and `release` when it ends. */
  track(conversationId: string): { signal: AbortSignal; pause: AbortSignal; release: () => void };
  /** Aborts what `kind` stops in the runs of the conversation this worker holds (none: nothing to do). */
  interrupt(conversationId: string, kind?: RunStopKind): void;
}

interface HeldRun {
  interrupt: AbortController;
  pause: AbortController;
}

const createRunInterrupts = (): RunInterrupts => {
  const held = new Map<string, Set<HeldRun>>();
  return {
    track(conversationId) {
      const run: HeldRun = { interrupt: new AbortController(), pause: new AbortController() };
      const set = held.get(conversationId) ?? new Set();
      set.add(run);
      held.set(conversationId, set);
      return {
        signal: run.interrupt.signal,
        pause: run.pause.signal,
        release: () => {
          set.delete(run);
          if (set.size === 0 && held.get(conversationId) === set) held.delete(conversationId);
        },
      };
    },
    interrupt(conversationId, kind = "interrupt") {
      for (const run of held.get(conversationId) ?? []) {
        if (kind === "interrupt") run.interrupt.abort(new Error("the user interrupted the run"));
        run.pause.abort(new Error("the user paused the run"));
      }
    },
  };
};

/** The registry, fed by the API's interrupts (Redis pub/sub); `stop` ends the subscription. */
export const startRunInterrupts = async (deps: {
  redis: Pick<Redis, "duplicate">;
  prefix: string;
  logger: Logger;
}): Promise<{ interrupts: RunInterrupts; stop: () => void }> => {
  const interrupts = createRunInterrupts();
  const stop = await listenForRunInterrupts(
    deps.redis,
    deps.prefix,
    (conversationId, kind) => {
      deps.logger.info({ conversation_id: conversationId, kind }, "run interrupted by its user");
      interrupts.interrupt(conversationId, kind);
    },
    (err) => deps.logger.warn({ err }, "run interrupt subscription failed"),
  );
  return { interrupts, stop };
};
