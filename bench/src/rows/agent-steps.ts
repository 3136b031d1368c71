import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { type AgentRunDeps, runAgent, systemPromptTools } from "@tern/agent";
import { createLogger } from "@tern/core";
import { eventsRepository, usersRepository } from "@tern/db";
import {
  createRedisPrefix,
  createSandboxedConversation,
  createTestDatabase,
  prepareTestSandboxes,
  type RecordedRequest,
  removeSandboxesOfNamespace,
  type ScriptedReply,
  startLlmServer,
} from "@tern/testing";
// The store the worker hands every run: the bench runs the loop as the worker runs it.
import { agentRunStore } from "../../../apps/worker/src/agent/run-store.ts";
import type { BenchContext } from "../context.ts";
import type { BenchResult, BenchRow } from "../report.ts";
import { row } from "../report.ts";
import { summarize } from "../stats.ts";

const bytesOf = (r: RecordedRequest) => Buffer.byteLength(JSON.stringify(r.body), "utf8");

/**
 * The scripted agent's step `n` (1-based): a working agent's round of a terminal command, file
 * writes, an edit, a view and a thought, each with a few hundred bytes of its own, so the history
 * grows as a real one does and the condenser has to work.
 */
const stepReply = (n: number, steps: number): ScriptedReply => {
  if (n > steps) return { toolCalls: [{ name: "finish", arguments: { message: `Done after ${steps} steps.` } }] };
  // Steps 5b+1 to 5b+3 write, edit and view the block's own file.
  const file = `notes/block-${Math.floor(n / 5)}.md`;
  const line = `step ${n}: checked the module, the tests and the call sites; all consistent.`;
  const header = `# Notes of block ${Math.floor(n / 5)}`;
  const calls: Record<number, { name: string; arguments: Record<string, unknown> }> = {
    0: {
      name: "terminal",
      arguments: { command: `echo step-${n} && ls -1 notes | tail -3 && wc -l notes/* | tail -1` },
    },
    1: {
      name: "file_editor",
      arguments: { command: "create", path: file, file_text: `${header}\n${`${line}\n`.repeat(8)}` },
    },
    2: {
      name: "file_editor",
      arguments: { command: "str_replace", path: file, old_str: header, new_str: `${header} (checked)` },
    },
    3: { name: "file_editor", arguments: { command: "view", path: file } },
    4: { name: "think", arguments: { thought: `Thought ${n}: ${line.repeat(4)}` } },
  };
  const call = calls[n % 5] ?? calls[4];
  return { text: n % 5 === 0 ? `Step ${n}.` : undefined, toolCalls: call ? [call] : [] };
};

interface StepRun {
  /** Bytes of each step's request (the agent's calls, not the condenser's summaries), in order. */
  stepBytes: number[];
  /** Time between one step's request and the next one's arriving: the tool, the writes, the read, the build. */
  stepMs: number[];
  summaryCalls: number;
  runMs: number;
}

/**
 * One run of `steps` scripted steps plus `finish`, through the real loop, Postgres and a real
 * sandbox against the scripted LLM (OpenAI wire format, the condenser at its default).
 */
const measureRun = async (ctx: BenchContext, steps: number): Promise<StepRun> => {
  const database = await createTestDatabase();
  const namespace = createRedisPrefix();
  const llm = await startLlmServer();
  try {
    await prepareTestSandboxes(ctx.sandboxes);
    const user = await usersRepository(database.db).create();
    const { conversationId } = await createSandboxedConversation(
      { db: database.db, sandboxes: ctx.sandboxes, namespace, userId: user.id, tools: systemPromptTools() },
      {
        message: "Work through the notes, step by step.",
        files: { "README.md": "# project\n", "notes/README.md": "notes\n" },
      },
    );
    let step = 0;
    const arrivals: number[] = [];
    llm.setResponder((r) => {
      if (!r.body.tools) return { text: `GOAL: ${steps} steps. DONE: ${step}. LEFT: ${steps - step}.` };
      arrivals.push(performance.now());
      step++;
      return stepReply(step, steps);
    });
    const env = llm.workerEnv("openai");
    const deps: AgentRunDeps = {
      store: agentRunStore(database.db),
      sandboxes: ctx.sandboxes,
      logger: createLogger("bench", "silent"),
      settings: {
        LLM_PROVIDER: "openai",
        LLM_BASE_URL: env.LLM_BASE_URL,
        LLM_API_KEY: env.LLM_API_KEY,
        LLM_MODEL: env.LLM_MODEL,
        MAX_ITERATIONS: steps + 10,
        // The scripted steps repeat by design: the stuck rules are not what this row is about.
        AGENT_STUCK_MONOLOGUE: 0,
      },
    };
    const began = performance.now();
    const outcome = await runAgent(deps, conversationId, randomUUID());
    const runMs = performance.now() - began;
    if (outcome.outcome !== "ended" || outcome.status !== "finished") {
      const last = (await eventsRepository(database.db).listAll(conversationId)).slice(-3);
      throw new Error(`the scripted run did not finish: ${JSON.stringify(outcome)} ${JSON.stringify(last)}`);
    }
    // Every scripted call is meant to succeed: a row measured on failing tools measures nothing.
    const failed = (await eventsRepository(database.db).listAll(conversationId)).filter(
      (e) =>
        e.kind === "AgentErrorEvent" ||
        (e.kind === "ObservationEvent" &&
          (e.payload as { observation?: { is_error?: boolean } }).observation?.is_error),
    );
    if (failed.length > 0) throw new Error(`${failed.length} scripted calls failed, e.g. ${JSON.stringify(failed[0])}`);
    return {
      stepBytes: llm.requests.filter((r) => r.body.tools).map(bytesOf),
      stepMs: arrivals.slice(1).map((t, i) => t - (arrivals[i] ?? t)),
      summaryCalls: llm.requests.filter((r) => !r.body.tools).length,
      runMs,
    };
  } finally {
    await llm.close();
    await removeSandboxesOfNamespace(namespace, ctx.sandboxes).catch(() => undefined);
    await database.drop();
  }
};

/** The values of the newest `*-agent-steps-before.json` in bench/results: the same run on the code before the split. */
const beforeRun = async (): Promise<{ file: string; values: Map<string, number> } | null> => {
  const dir = fileURLToPath(new URL("../../results/", import.meta.url));
  const files = (await readdir(dir).catch(() => [])).filter((f) => f.endsWith("-agent-steps-before.json")).sort();
  const file = files.at(-1);
  if (!file) return null;
  const result = JSON.parse(await readFile(`${dir}${file}`, "utf8")) as BenchResult;
  return { file, values: new Map(result.rows.map((r) => [r.id, r.value])) };
};

/**
 * A long scripted run's cost per step: the bytes of each LLM request and the time from
 * one step's request to the next, over 300 steps (quick: 30) of terminal, file_editor and think
 * calls on a real sandbox. Beside each, the same row of the run recorded before the agent core was
 * split (`results/*-agent-steps-before.json`), when there is one.
 */
export const agentStepsRows = async (ctx: BenchContext): Promise<BenchRow[]> => {
  const steps = ctx.quick ? 30 : 300;
  ctx.progress(`agent steps: ${steps} scripted steps on a sandbox`);
  // Time per step follows the machine's load (2 cores shared here): kept beside the numbers.
  const loadBefore = loadavg()[0];
  const run = await measureRun(ctx, steps);
  const before = ctx.quick ? null : await beforeRun();
  const bytes = summarize(run.stepBytes);
  const ms = summarize(run.stepMs);
  const floorOf = (id: string) => ({
    floor: before?.values.get(id) ?? null,
    floorLabel: before ? `before the split (${before.file})` : null,
  });
  const detail = {
    steps,
    llmCalls: run.stepBytes.length,
    summaryCalls: run.summaryCalls,
    runMs: Math.round(run.runMs),
    bytes: { p50KiB: bytes.p50 / 1024, maxKiB: bytes.max / 1024, lastKiB: (run.stepBytes.at(-1) ?? 0) / 1024 },
    stepMs: ms,
    loadAverage1m: { before: loadBefore, after: loadavg()[0] },
  };
  ctx.progress(
    `agent steps: ${(bytes.mean / 1024).toFixed(1)} KiB/step, ${ms.mean.toFixed(0)} ms/step (p50 ${ms.p50.toFixed(0)})`,
  );
  return [
    row({
      id: "agent.steps.request.mean",
      label: `LLM request per step, mean (${steps} scripted steps)`,
      unit: "KiB",
      value: bytes.mean / 1024,
      ...floorOf("agent.steps.request.mean"),
      detail,
    }),
    row({
      id: "agent.steps.time.mean",
      label: `time per step, mean (${steps} scripted steps, real sandbox)`,
      unit: "ms",
      value: ms.mean,
      ...floorOf("agent.steps.time.mean"),
    }),
    row({
      id: "agent.steps.time.p50",
      label: `time per step, p50 (${steps} scripted steps, real sandbox)`,
      unit: "ms",
      value: ms.p50,
      ...floorOf("agent.steps.time.p50"),
    }),
  ];
};
