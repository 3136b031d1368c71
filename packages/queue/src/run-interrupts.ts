import type { Redis } from "ioredis";

/**
 * The channel on which the API tells the workers that a user interrupted a conversation's run
 * (POST /interrupt). The API never reaches a worker's sandbox itself: the worker holding the run
 * hears it and stops the run (the message is the conversation id). Pub/sub may lose a message;
 * the PauseEvent the API stored first still stops the run at its next step.
 */
export const runInterruptsChannel = (prefix: string): string => `${prefix}:agent-run-interrupts`;

/**
 * What the word asks: `interrupt` stops the run now (POST /interrupt); `pause` (POST /pause) stops
 * only the start-up of the user's MCP servers, which may wait on a server for up to
 * MCP_STARTUP_TIMEOUT_MS, and the run then pauses at its next step as a pause does.
 */
export type RunStopKind = "interrupt" | "pause";

/** A pause's message: its kind before the id. An interrupt's is the id alone, as it always was. */
const PAUSE_PREFIX = "pause:";

export const publishRunInterrupt = async (
  redis: Pick<Redis, "publish">,
  prefix: string,
  conversationId: string,
  kind: RunStopKind = "interrupt",
): Promise<void> => {
  await redis.publish(
    runInterruptsChannel(prefix),
    kind === "pause" ? `${PAUSE_PREFIX}${conversationId}` : conversationId,
  );
};

/**
 * Calls `onInterrupt` with each interrupted conversation's id, on a connection of its own (a
 * subscribed connection can do nothing else). Resolves once subscribed; the function it gives
 * ends the subscription.
 */
export const listenForRunInterrupts = async (
  redis: Pick<Redis, "duplicate">,
  prefix: string,
  onInterrupt: (conversationId: string, kind: RunStopKind) => void,
  onError: (err: Error) => void,
): Promise<() => void> => {
  const channel = runInterruptsChannel(prefix);
  const sub = redis.duplicate({ maxRetriesPerRequest: null });
  sub.on("error", onError);
  sub.on("message", (from: string, message: string) => {
    if (from !== channel) return;
    if (message.startsWith(PAUSE_PREFIX)) onInterrupt(message.slice(PAUSE_PREFIX.length), "pause");
    else onInterrupt(message, "interrupt");
  });
  await sub.subscribe(channel);
  return () => sub.disconnect();
};
