import { randomUUID } from "node:crypto";
import { createLogger } from "@tern/core";
import { createRedis, publishRunInterrupt } from "@tern/queue";
import { createRedisPrefix, testRedisUrl, waitFor } from "@tern/testing";
import { afterAll, describe, expect, it } from "vitest";
import { startRunInterrupts } from "./run-interrupts.ts";

// As the worker connects (its offline queue holds commands until the connection is up).
const redis = createRedis(testRedisUrl(), "worker");
const prefix = createRedisPrefix();

afterAll(() => redis.disconnect());

describe("a run's stops, heard from the API over pub/sub", () => {
  it("an interrupt aborts the run and its MCP start-up; a pause only the MCP start-up; other runs hear neither", async () => {
    const { interrupts, stop } = await startRunInterrupts({ redis, prefix, logger: createLogger("test", "silent") });
    try {
      const [paused, interrupted, other] = [randomUUID(), randomUUID(), randomUUID()];
      const p = interrupts.track(paused);
      const i = interrupts.track(interrupted);
      const o = interrupts.track(other);
      await publishRunInterrupt(redis, prefix, paused, "pause");
      await publishRunInterrupt(redis, prefix, interrupted);
      await waitFor(() => p.pause.aborted && i.signal.aborted, { what: "both words to arrive" });
      expect([p.signal.aborted, p.pause.aborted]).toEqual([false, true]);
      expect([i.signal.aborted, i.pause.aborted]).toEqual([true, true]);
      expect([o.signal.aborted, o.pause.aborted]).toEqual([false, false]);
      // A released run hears nothing more.
      o.release();
      await publishRunInterrupt(redis, prefix, other);
      await publishRunInterrupt(redis, prefix, paused);
      await waitFor(() => p.signal.aborted, { what: "the second word" });
      expect(o.signal.aborted).toBe(false);
    } finally {
      stop();
    }
  });
});
