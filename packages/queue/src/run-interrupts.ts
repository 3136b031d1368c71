import type { Redis } from "ioredis";

/**
 * The channel on which the API tells the workers that a user interrupted a conversation's run
 * (POST /interrupt). The API never reaches a worker's sandbox itself: the worker holding the run
 * hears it and stops the run (the message is the conversation id). Pub/sub may lose a message;
 * the PauseEvent the API stored first still stops the run at its next step.
 */
export const runInterruptsChannel = (prefix: string): string => `${prefix}:agent-run-interrupts`;

export const publishRunInterrupt = async (
  redis: Pick<Redis, "publish">,
  prefix: string,
  conversationId: string,
): Promise<void> => {
  await redis.publish(runInterruptsChannel(prefix), conversationId);
};

/**
 * Calls `onInterrupt` with each interrupted conversation's id, on a connection of its own (a
 * subscribed connection can do nothing else). Resolves once subscribed; the function it gives
 * ends the subscription.
 */
export const listenForRunInterrupts = async (
  redis: Pick<Redis, "duplicate">,
  prefix: string,
  onInterrupt: (conversationId: string) => void,
  onError: (err: Error) => void,
): Promise<() => void> => {
  const channel = runInterruptsChannel(prefix);
  const sub = redis.duplicate({ maxRetriesPerRequest: null });
  sub.on("error", onError);
  sub.on("message", (from: string, message: string) => {
    if (from === channel) onInterrupt(message);
  });
  await sub.subscribe(channel);
  return () => sub.disconnect();
};
