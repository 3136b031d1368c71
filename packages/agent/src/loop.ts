import { randomUUID } from "node:crypto";
import type { Conversation, ExecutionStatus, Logger, StoredEvent } from "@tern/core";
import {
  agentRunsRepository,
  conversationsRepository,
  type Database,
  type EventDraft,
  eventsRepository,
  type RunLease,
  RunLeaseLostError,
  sandboxesRepository,
} from "@tern/db";
import type { SandboxDriver } from "@tern/sandbox";
import type { Kysely } from "kysely";
import type { z } from "zod";
import { type ActionPayload, buildHistory, type ObservationPayload, type ToolErrorPayload } from "./history.ts";
import { chooseLlm, type LlmClientOptions, type LlmSettings } from "./llm/select.ts";
import { type LlmClient, LlmError, type LlmResponse, type ToolCall } from "./llm/types.ts";
import { analyzeRun } from "./run-state.ts";
import { buildSystemPrompt } from "./system-prompt.ts";
import { isToolName, type ToolName, toolArgs, toolDefinitions } from "./tools/definitions.ts";
import { executeTool } from "./tools/execute.ts";

export interface AgentRunDeps {
  db: Kysely<Database>;
  sandboxes: Pick<SandboxDriver, "exec" | "upload" | "inspect">;
  settings: LlmSettings & { MAX_ITERATIONS: number };
  logger: Logger;
  llmOptions?: LlmClientOptions;
  /** Output kept per tool call (default 30 000 bytes). */
  maxToolOutputBytes?: number;
}

export type RunOutcome =
  | { outcome: "ended"; status: ExecutionStatus }
  /** Another run holds the conversation; try again once it ends. */
  | { outcome: "busy"; activeRunId: string }
  /** Nothing to do: the run already ended, there is nothing to answer, or the conversation is gone. */
  | { outcome: "skipped"; reason: string }
  /** This worker lost the run to another attempt; it stops without writing. */
  | { outcome: "lost" };

const actionKinds: Record<ToolName, string> = {
  terminal: "TerminalAction",
  file_editor: "FileEditorAction",
  think: "ThinkAction",
  finish: "FinishAction",
};

const agentError = (error: string): EventDraft => ({ kind: "AgentErrorEvent", source: "agent", payload: { error } });

const issuesText = (error: z.ZodError): string =>
  error.issues.map((i) => `${i.path.length ? `${i.path.join(".")}: ` : ""}${i.message}`).join("; ");

/** One event per tool call of a response: an ActionEvent, or an AgentErrorEvent the model will read. */
/** Some OpenAI-compatible servers send calls without ids, or the same id twice: every call needs its own. */
const withUniqueIds = (calls: ToolCall[]): ToolCall[] => {
  const seen = new Set<string>();
  return calls.map((c) => {
    const id = c.id && !seen.has(c.id) ? c.id : `call_${randomUUID().replaceAll("-", "")}`;
    seen.add(id);
    return id === c.id ? c : { ...c, id };
  });
};

export const toolCallEvents = (response: LlmResponse, responseId: string, historySeq: number): EventDraft[] =>
  withUniqueIds(response.toolCalls).map((call: ToolCall, i): EventDraft => {
    const thought = i === 0 && response.text ? [{ type: "text" as const, text: response.text }] : [];
    const fail = (error: string): EventDraft => ({
      kind: "AgentErrorEvent",
      source: "agent",
      payload: {
        tool_name: call.name,
        tool_call_id: call.id,
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
        thought,
        error,
      } satisfies ToolErrorPayload,
    });
    if (!isToolName(call.name)) {
      return fail(`Unknown tool "${call.name}". The tools are: ${toolDefinitions.map((t) => t.name).join(", ")}.`);
    }
    let raw: unknown;
    try {
      raw = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
    } catch (err) {
      return fail(`The arguments of ${call.name} are not valid JSON (${(err as Error).message}). Send a JSON object.`);
    }
    const parsed = toolArgs[call.name].safeParse(raw);
    if (!parsed.success) return fail(`Invalid arguments for ${call.name}: ${issuesText(parsed.error)}.`);
    return {
      kind: "ActionEvent",
      source: "agent",
      payload: {
        tool_name: call.name,
        tool_call_id: call.id,
        thought,
        action: { kind: actionKinds[call.name], ...(parsed.data as Record<string, unknown>) },
        tool_call: call,
        llm_response_id: responseId,
        history_seq: historySeq,
      } satisfies ActionPayload,
    };
  });

/** The sandbox's container, or null when it is gone (removed, or never made). */
const containerOf = async (db: Kysely<Database>, conversation: Conversation): Promise<string | null> => {
  if (!conversation.sandboxId) return null;
  const sandbox = await sandboxesRepository(db).get(conversation.sandboxId);
  if (!sandbox || sandbox.status === "MISSING" || sandbox.status === "ERROR") return null;
  return sandbox.containerId ?? sandbox.containerName;
};

/**
 * One run of the agent on a conversation. Every decision is made from the stored events, re-read
 * at each step, so a worker that picks the run up after another one died continues where it
 * stopped: a call whose ActionEvent is stored but not its ObservationEvent is run through the
 * sandbox's run-once record (tools/run-once.ts), which returns the first execution's result.
 */
export const runAgent = async (deps: AgentRunDeps, conversationId: string, runId: string): Promise<RunOutcome> => {
  const log = deps.logger.child({ conversation_id: conversationId, run_id: runId });
  const conversations = conversationsRepository(deps.db);
  const events = eventsRepository(deps.db);
  const runs = agentRunsRepository(deps.db);

  const conversation = await conversations.get(conversationId);
  if (!conversation) return { outcome: "skipped", reason: "no such conversation" };

  // Cheap check first: a run waiting for another one is asked again every second or so.
  const holder = await runs.activeRun(conversationId);
  if (holder && holder !== runId) return { outcome: "busy", activeRunId: holder };
  // A new run with nothing to answer writes nothing (e.g. a second /run after the agent finished).
  if (holder !== runId && !analyzeRun(await events.listAll(conversationId)).needsAgent) {
    return { outcome: "skipped", reason: "nothing to answer" };
  }

  const begun = await runs.begin(conversationId, runId);
  if (begun.outcome === "busy") return { outcome: "busy", activeRunId: begun.activeRunId };
  if (begun.outcome === "ended") return { outcome: "skipped", reason: "run already ended" };
  if (begun.outcome === "missing") return { outcome: "skipped", reason: "no such conversation" };
  const lease: RunLease = begun.lease;
  log.info({ outcome: begun.outcome, attempt: lease.attempt }, "agent run taken");

  const end = async (status: ExecutionStatus, drafts: EventDraft[] = []): Promise<RunOutcome> => {
    await runs.end(lease, status, drafts);
    log.info({ status }, "agent run ended");
    return { outcome: "ended", status };
  };

  try {
    const choice = chooseLlm(deps.settings, conversation.llmModel, deps.llmOptions);
    if (!choice.ok) return await end("error", [agentError(choice.reason)]);
    const llm: LlmClient = choice.client;

    for (;;) {
      const history: StoredEvent[] = await events.listAll(conversationId);
      const state = analyzeRun(history);

      if (state.pending.length > 0) {
        const containerId = await containerOf(deps.db, conversation);
        for (const { event, payload } of state.pending) {
          const needsSandbox = payload.tool_name === "terminal" || payload.tool_name === "file_editor";
          if (needsSandbox && !containerId) {
            return await end("error", [agentError("The conversation's sandbox is gone; tools cannot run any more.")]);
          }
          const { kind: _kind, ...args } = payload.action;
          let result: Awaited<ReturnType<typeof executeTool>>;
          try {
            result = await executeTool(payload.tool_name as ToolName, args as never, {
              sandbox: deps.sandboxes,
              containerId: containerId ?? "",
              workspaceDir: conversation.workspaceDir,
              actionId: event.id,
              maxOutputBytes: deps.maxToolOutputBytes ?? 30_000,
            });
          } catch (err) {
            // A container that is gone or stopped will not come back by retrying: end the run.
            // Anything else (a Docker hiccup) is thrown, and the job's retry resumes the run.
            const info = containerId ? await deps.sandboxes.inspect(containerId).catch(() => undefined) : null;
            if (info === undefined || info?.state === "running") throw err;
            log.warn({ err, state: info?.state ?? "missing" }, "sandbox not running");
            return await end("error", [
              agentError(
                `The conversation's sandbox is ${info ? `not running (${info.state})` : "gone"}; tools cannot run any more.`,
              ),
            ]);
          }
          await runs.append(lease, [
            {
              kind: "ObservationEvent",
              source: "environment",
              payload: {
                tool_name: payload.tool_name,
                tool_call_id: payload.tool_call_id,
                action_id: event.id,
                observation: result.observation,
              } satisfies ObservationPayload,
            },
          ]);
        }
        continue;
      }

      if (state.done) return await end("finished");
      if (state.pauseRequested) return await end("paused");
      if (state.stuck) return await end("stuck", [agentError(state.stuck)]);
      if (state.iterations >= deps.settings.MAX_ITERATIONS) {
        return await end("error", [
          agentError(
            `The agent reached MAX_ITERATIONS (${deps.settings.MAX_ITERATIONS} LLM calls) in this run without finishing. ` +
              "Send a message or POST /run to let it continue.",
          ),
        ]);
      }

      const { system, messages } = buildHistory(history, conversation.skills);
      let response: LlmResponse;
      try {
        response = await llm.complete({
          system:
            system ??
            buildSystemPrompt({
              workspaceDir: conversation.workspaceDir,
              repository: conversation.selectedRepository,
              skills: conversation.skills,
            }),
          messages,
          tools: toolDefinitions,
        });
      } catch (err) {
        if (!(err instanceof LlmError)) throw err;
        log.warn({ err: err.message, status: err.status }, "LLM call failed");
        return await end("error", [agentError(`${err.message}${err.status ? ` (HTTP ${err.status})` : ""}`)]);
      }
      await conversations.addMetrics(conversationId, {
        llm_calls: 1,
        prompt_tokens: response.usage.promptTokens,
        completion_tokens: response.usage.completionTokens,
        total_tokens: response.usage.promptTokens + response.usage.completionTokens,
        cache_read_tokens: response.usage.cacheReadTokens,
        cache_write_tokens: response.usage.cacheWriteTokens,
      });
      // Our own id, not the provider's: a provider may repeat ids, and the grouping must be exact.
      const responseId = randomUUID();
      // What the model had seen: a user message stored after this is still unanswered.
      const historySeq = history.at(-1)?.seq ?? 0;
      if (response.toolCalls.length === 0) {
        await runs.append(lease, [
          {
            kind: "MessageEvent",
            source: "agent",
            payload: {
              llm_message: { role: "assistant", content: [{ type: "text", text: response.text }] },
              llm_response_id: responseId,
              history_seq: historySeq,
            },
          },
        ]);
      } else {
        await runs.append(lease, toolCallEvents(response, responseId, historySeq));
      }
    }
  } catch (err) {
    if (err instanceof RunLeaseLostError) {
      log.warn("agent run lost to another worker; stopping without writing");
      return { outcome: "lost" };
    }
    throw err;
  }
};

/** For a run whose job BullMQ gave up on (or lost): the conversation ends in `error`, with the reason. */
export const abandonRun = async (db: Kysely<Database>, conversationId: string, runId: string, reason: string) =>
  agentRunsRepository(db).abandon(conversationId, runId, [agentError(`The agent run failed: ${reason}`)]);
