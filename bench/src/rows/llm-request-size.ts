import { randomUUID } from "node:crypto";
import { type AgentRunDeps, runAgent, systemPromptTools } from "@tern/agent";
import { createLogger, newEvent } from "@tern/core";
import { eventsRepository } from "@tern/db";
import { createConversationFixture, createTestDatabase, type RecordedRequest, startLlmServer } from "@tern/testing";
// The store the worker hands every run: the bench runs the loop as the worker runs it.
import { agentRunStore } from "../../../apps/worker/src/agent/run-store.ts";
import type { BenchContext } from "../context.ts";
import { type BenchRow, row } from "../report.ts";
import { summarize } from "../stats.ts";

interface RunSizes {
  /** Bytes of each step's request (the agent's calls, not the summaries'), in order. */
  steps: number[];
  /** Bytes of the condenser's summary calls. */
  summaries: number[];
  condensations: number;
  ms: number;
}

const bytesOf = (r: RecordedRequest) => Buffer.byteLength(JSON.stringify(r.body), "utf8");

/**
 * One run of `steps` think steps (each with a thought of a few hundred bytes, as a working agent's
 * turn), then `finish`, through the real loop and Postgres against the scripted LLM; the size of
 * every request it sent. No sandbox: the steps cost LLM round trips and writes only.
 */
const measureRun = async (ctx: BenchContext, steps: number, condenserMaxEvents: number): Promise<RunSizes> => {
  const database = await createTestDatabase();
  const llm = await startLlmServer();
  try {
    const { conversationId } = await createConversationFixture(database.db);
    await eventsRepository(database.db).append(conversationId, [
      newEvent.systemPrompt("You are a coding agent. Think, then finish.", systemPromptTools()),
      newEvent.userMessage([{ type: "text", text: "Think it all through, step by step." }]),
    ]);
    let step = 0;
    llm.setResponder((r) => {
      if (!r.body.tools) return { text: `GOAL: think ${steps} times. DONE: ${step} thoughts. LEFT: ${steps - step}.` };
      step++;
      if (step > steps) return { toolCalls: [{ name: "finish", arguments: { message: "Done." } }] };
      const thought = `Thought ${step}: ${"checked the module, the tests and the call sites; ".repeat(6)}`;
      return { toolCalls: [{ name: "think", arguments: { thought } }] };
    });
    const env = llm.workerEnv("openai");
    const deps: AgentRunDeps = {
      store: agentRunStore(database.db),
      // No conversation here has a sandbox: the driver is never called.
      sandboxes: ctx.sandboxes,
      logger: createLogger("bench", "silent"),
      settings: {
        LLM_PROVIDER: "openai",
        LLM_BASE_URL: env.LLM_BASE_URL,
        LLM_API_KEY: env.LLM_API_KEY,
        LLM_MODEL: env.LLM_MODEL,
        MAX_ITERATIONS: steps + 10,
        AGENT_CONDENSER_MAX_EVENTS: condenserMaxEvents,
        // Think steps only: a monologue by the stuck rule, which this row is not about.
        AGENT_STUCK_MONOLOGUE: 0,
      },
    };
    const began = performance.now();
    const outcome = await runAgent(deps, conversationId, randomUUID());
    const ms = performance.now() - began;
    if (outcome.outcome !== "ended" || outcome.status !== "finished") {
      throw new Error(`the scripted run did not finish: ${JSON.stringify(outcome)}`);
    }
    const events = await eventsRepository(database.db).listAll(conversationId);
    return {
      steps: llm.requests.filter((r) => r.body.tools).map(bytesOf),
      summaries: llm.requests.filter((r) => !r.body.tools).map(bytesOf),
      condensations: events.filter((e) => e.kind === "CondensationEvent").length,
      ms,
    };
  } finally {
    await llm.close();
    await database.drop();
  }
};

const kib = (bytes: number) => bytes / 1024;
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/**
 * LLM request size per step on a long run, with the condenser (its default of 80 events
 * in the view) and without it (the whole history every step): the mean and the largest request of
 * a step, and everything sent over the run, the summaries' calls included (what condensing costs).
 */
export const llmRequestSizeRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const steps = ctx.quick ? 60 : 400;
  ctx.progress(`llm request size: ${steps} steps with the condenser`);
  const condensed = await measureRun(ctx, steps, 80);
  ctx.progress(`llm request size: ${steps} steps without it`);
  const full = await measureRun(ctx, steps, 0);
  const [c, f] = [summarize(condensed.steps), summarize(full.steps)];
  const detail = (r: RunSizes) => ({
    steps: r.steps.length,
    p50KiB: kib(summarize(r.steps).p50),
    lastKiB: kib(r.steps.at(-1) ?? 0),
    summaryCalls: r.summaries.length,
    summaryMeanKiB: kib(summarize(r.summaries).mean || 0),
    condensations: r.condensations,
    runMs: Math.round(r.ms),
  });
  const floorLabel = "without condensation";
  // The targets hold on the full run: at 60 steps the whole history is still small.
  const full400 = !ctx.quick;
  return [
    row({
      id: "llm.request.condensed.mean",
      label: `LLM request per step, mean (${steps} steps, condensed)`,
      unit: "KiB",
      value: kib(c.mean),
      floor: kib(f.mean),
      floorLabel,
      ...(full400 ? { maxRatio: 0.5 } : {}),
      detail: { condensed: detail(condensed), full: detail(full) },
    }),
    row({
      id: "llm.request.condensed.max",
      label: `LLM request per step, largest (${steps} steps, condensed)`,
      unit: "KiB",
      value: kib(c.max),
      floor: kib(f.max),
      floorLabel,
      ...(full400 ? { maxRatio: 0.25 } : {}),
    }),
    row({
      id: "llm.request.condensed.total",
      label: `LLM bytes sent over the run, summaries included (${steps} steps, condensed)`,
      unit: "MiB",
      value: kib(sum(condensed.steps) + sum(condensed.summaries)) / 1024,
      floor: kib(sum(full.steps)) / 1024,
      floorLabel,
      ...(full400 ? { maxRatio: 0.5 } : {}),
    }),
  ];
};
