import { startLlmServer } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { retryAfterMsOf } from "./context-errors.ts";
import { backoffMs, retryWaitText, withRetries } from "./retry.ts";
import { chooseLlm } from "./select.ts";
import { type LlmClient, LlmError, type LlmResponse, type LlmRetryWait } from "./types.ts";

const reply: LlmResponse = {
  id: null,
  text: "done",
  toolCalls: [],
  model: "m",
  usage: { promptTokens: 1, completionTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 },
};

/** A client that fails with `failures` in order, then answers. */
const failing = (failures: LlmError[]): LlmClient & { calls: number } => {
  const client = {
    provider: "anthropic" as const,
    model: "m",
    calls: 0,
    async complete() {
      const failure = failures[client.calls++];
      if (failure) throw failure;
      return reply;
    },
  };
  return client;
};

const rateLimited = (retryAfterMs: number | null) =>
  new LlmError("LLM request failed: 429 rate limited", 429, { transient: "rate_limited", retryAfterMs });
const overloaded = () => new LlmError("LLM request failed: 529 overloaded", 529, { transient: "overloaded" });

describe("withRetries", () => {
  it("waits out a storm of 429s as the provider asks, then 529s with backoff, and answers", async () => {
    const slept: number[] = [];
    const waits: LlmRetryWait[] = [];
    const inner = failing([rateLimited(32_000), rateLimited(2_000), overloaded(), overloaded(), overloaded()]);
    const client = withRetries(inner, {
      maxWaitMs: 600_000,
      baseBackoffMs: 8_000,
      random: () => 0.5,
      sleep: async (ms) => void slept.push(ms),
    });
    const answer = await client.complete({ system: "", messages: [], tools: [] }, undefined, {
      onRetryWait: (w) => void waits.push(w),
    });
    expect(answer.text).toBe("done");
    expect(inner.calls).toBe(6);
    // The provider's Retry-After first, then 8 s doubling, each with half of it drawn.
    expect(slept).toEqual([32_000, 2_000, 6_000, 12_000, 24_000]);
    expect(waits.map((w) => [w.attempt, w.reason, w.retryAfter])).toEqual([
      [1, "rate_limited", true],
      [2, "rate_limited", true],
      [3, "overloaded", false],
      [4, "overloaded", false],
      [5, "overloaded", false],
    ]);
    expect(retryWaitText(waits[0] as LlmRetryWait)).toBe("the model is rate-limited; retrying in 32 s");
  });

  it("gives up once its waits would pass the most it may wait, saying how long it waited", async () => {
    const slept: number[] = [];
    const client = withRetries(failing(Array.from({ length: 20 }, overloaded)), {
      maxWaitMs: 10_000,
      baseBackoffMs: 4_000,
      random: () => 1,
      sleep: async (ms) => void slept.push(ms),
    });
    const err = await client.complete({ system: "", messages: [], tools: [] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LlmError);
    expect((err as LlmError).status).toBe(529);
    expect((err as LlmError).message).toMatch(/the model is overloaded: gave up after 10 s of retries/);
    // 4 s, then 8 s cut to the 6 s left, then nothing left.
    expect(slept).toEqual([4_000, 6_000]);
  });

  it("does not wait for a Retry-After longer than what is left, nor retry what retrying cannot cure", async () => {
    const slept: number[] = [];
    const sleep = async (ms: number) => void slept.push(ms);
    const long = withRetries(failing([rateLimited(3_600_000)]), { maxWaitMs: 600_000, sleep });
    await expect(long.complete({ system: "", messages: [], tools: [] })).rejects.toThrow(
      /asks to wait 3600 s more, past LLM_RETRY_MAX_WAIT/,
    );
    const bad = failing([new LlmError("LLM request failed: 400 bad request", 400)]);
    await expect(
      withRetries(bad, { maxWaitMs: 600_000, sleep }).complete({ system: "", messages: [], tools: [] }),
    ).rejects.toThrow(/400 bad request/);
    expect(bad.calls).toBe(1);
    expect(slept).toEqual([]);
  });

  it("stops waiting when the call is aborted", async () => {
    const abort = new AbortController();
    const client = withRetries(failing(Array.from({ length: 5 }, overloaded)), {
      maxWaitMs: 600_000,
      baseBackoffMs: 60_000,
    });
    const call = client.complete({ system: "", messages: [], tools: [] }, abort.signal, {
      onRetryWait: () => abort.abort(),
    });
    await expect(call).rejects.toThrow(/abort/i);
  });

  it("draws its backoff between half and all of the doubled base, capped", () => {
    expect(backoffMs(1, 4_000, 64_000, () => 0)).toBe(2_000);
    expect(backoffMs(3, 4_000, 64_000, () => 0.999_999)).toBe(16_000);
    expect(backoffMs(9, 4_000, 64_000, () => 1)).toBe(64_000);
  });
});

describe("retryAfterMsOf", () => {
  it("reads retry-after-ms, Retry-After in seconds, and Retry-After as an HTTP date", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterMsOf(new Headers({ "retry-after-ms": "1500" }), now)).toBe(1500);
    expect(retryAfterMsOf(new Headers({ "retry-after": "32" }), now)).toBe(32_000);
    expect(retryAfterMsOf(new Headers({ "retry-after": "0.25" }), now)).toBe(250);
    expect(retryAfterMsOf(new Headers({ "retry-after": "Thu, 01 Jan 2026 00:01:30 GMT" }), now)).toBe(90_000);
    expect(retryAfterMsOf(new Headers({ "retry-after": "soon" }), now)).toBeNull();
    expect(retryAfterMsOf(undefined, now)).toBeNull();
  });
});

describe("retries through the SDKs", () => {
  let server: Awaited<ReturnType<typeof startLlmServer>>;
  beforeAll(async () => {
    server = await startLlmServer();
  });
  afterAll(() => server.close());

  for (const provider of ["anthropic", "openai"] as const) {
    it(`retries ${provider}'s 429, 529 and 503 once each, with no retry of the SDK's own`, async () => {
      server.clear();
      const before = server.requests.length;
      server.push({ error: { status: 429 } }, { error: { status: 529 } }, { error: { status: 503 } }, { text: "hi" });
      const env = server.workerEnv(provider);
      const choice = chooseLlm(
        { LLM_PROVIDER: provider, LLM_BASE_URL: env.LLM_BASE_URL, LLM_API_KEY: "k", LLM_MODEL: "m" },
        null,
        { retry: { baseBackoffMs: 2 } },
      );
      if (!choice.ok) throw new Error(choice.reason);
      const waits: LlmRetryWait[] = [];
      const answer = await choice.client.complete(
        { system: "s", messages: [{ role: "user", text: "q" }], tools: [] },
        undefined,
        {
          onRetryWait: (w) => void waits.push(w),
        },
      );
      expect(answer.text).toBe("hi");
      expect(waits.map((w) => [w.reason, w.status])).toEqual([
        ["rate_limited", 429],
        ["overloaded", 529],
        ["server_error", 503],
      ]);
      expect(server.requests.length - before).toBe(4);
    });
  }
});
