import type { Logger } from "@tern/core";
import { listenForRunInterrupts } from "@tern/queue";
import type { Redis } from "ioredis";

/**
 * The runs this worker holds, by conversation, each with the AbortController that the user's
 * interrupt aborts (runAgent's `interrupt`).
 */
export interface RunInterrupts {
  /** A run begins here: its signal, and `release` when it ends. */
  track(conversationId: string): { signal: AbortSignal; release: () => void };
  /** Aborts the runs of the conversation this worker holds (none: nothing to do). */
  interrupt(conversationId: string): void;
}

const createRunInterrupts = (): RunInterrupts => {
  const held = new Map<string, Set<AbortController>>();
  return {
    track(conversationId) {
      const controller = new AbortController();
      const set = held.get(conversationId) ?? new Set();
      set.add(controller);
      held.set(conversationId, set);
      return {
        signal: controller.signal,
        release: () => {
          set.delete(controller);
          if (set.size === 0 && held.get(conversationId) === set) held.delete(conversationId);
        },
      };
    },
    interrupt(conversationId) {
      for (const c of held.get(conversationId) ?? []) c.abort(new Error("the user interrupted the run"));
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
    (conversationId) => {
      deps.logger.info({ conversation_id: conversationId }, "run interrupted by its user");
      interrupts.interrupt(conversationId);
    },
    (err) => deps.logger.warn({ err }, "run interrupt subscription failed"),
  );
  return { interrupts, stop };
};
