import { isToolCallError, type StoredEvent } from "@tern/core";
import { textOf } from "../history.ts";
import { type LlmClient, LlmContextLengthError, type LlmResponse } from "../llm/types.ts";
import { BYTES_PER_TOKEN } from "./tokens.ts";

const summarySystem =
  "You keep the working memory of a coding agent. Earlier parts of its conversation are being " +
  "removed from what it reads; your summary takes their place, and is all it will know of them.";

/**
 * Our summary prompt. It asks for what OpenHands' summarizing prompt asks (the user's goal, what
 * is done and pending, the code and version-control state, the task list), with the files touched
 * as a section of their own, since they are what an agent most often needs and forgets.
 */
const summaryPrompt = (events: string[]): string =>
  [
    "Below are events of the agent's conversation, oldest first, which may include an earlier summary.",
    "Write the summary that replaces them. Keep every fact the agent needs to finish the task, and nothing else.",
    "Use these sections (leave one out when it has nothing):",
    "",
    "GOAL: what the user asked for, with every requirement, constraint and clarification they gave.",
    "DONE: what the agent has done so far, with its results (commands run, tests passed or failed).",
    "LEFT: what still has to be done, in order.",
    "FILES: every file created, changed, deleted or read that matters, each with what was done to it.",
    "STATE: the current state of the work: the working directory, branch, last commit, processes " +
      "started, environment set up, failing tests and their errors.",
    "TASKS: the agent's task list if it kept one, with each task's title and status as written.",
    "",
    "Be concise: short lines, exact names, paths, commands and error messages. Do not invent anything.",
    "",
    ...events.map((e) => `<EVENT>\n${e}\n</EVENT>`),
    "",
    "Now write the summary.",
  ].join("\n");

const cut = (text: string, max: number): string =>
  text.length <= max
    ? text
    : `${text.slice(0, Math.floor(max / 2))}\n[… ${text.length - max} characters cut …]\n${text.slice(-Math.floor(max / 2))}`;

/** One event as the summarizer reads it. */
const eventText = (e: StoredEvent): string => {
  switch (e.kind) {
    case "MessageEvent":
      return `${e.source === "agent" ? "AGENT" : "USER"} MESSAGE:\n${textOf(e.payload.llm_message.content)}`;
    case "ActionEvent": {
      const { kind: _kind, ...args } = e.payload.action;
      const thought = textOf(e.payload.thought);
      return `${thought ? `AGENT THOUGHT: ${thought}\n` : ""}AGENT CALLED ${e.payload.tool_name}: ${JSON.stringify(args)}`;
    }
    case "ObservationEvent":
      return `RESULT OF ${e.payload.tool_name}${e.payload.observation.is_error ? " (failed)" : ""}:\n${textOf(e.payload.observation.content)}`;
    case "UserRejectObservation":
      return `THE USER REJECTED ${e.payload.tool_name}: ${e.payload.rejection_reason}`;
    case "CondensationEvent":
      return `SUMMARY OF EARLIER EVENTS:\n${e.payload.summary ?? ""}`;
    case "AgentErrorEvent":
      return isToolCallError(e)
        ? `AGENT CALLED ${e.payload.tool_name}: ${e.payload.tool_call.arguments}\nERROR: ${e.payload.error}`
        : `ERROR: ${e.payload.error}`;
    default:
      return `${e.kind}`;
  }
};

export interface Summary {
  text: string;
  response: LlmResponse;
}

/**
 * The summary of `forgotten`, written by the conversation's LLM. Each event is cut to its share of
 * the room the model has (half its context, when known); a summary request the provider still
 * refuses as too long is tried again with events cut shorter (OpenHands' hard context reset cuts
 * by 20% a try; we halve, three tries).
 */
export const summarize = async (
  llm: LlmClient,
  forgotten: StoredEvent[],
  maxTokens: number | null,
  signal?: AbortSignal,
): Promise<Summary> => {
  const texts = forgotten.map(eventText);
  const roomChars = maxTokens !== null ? Math.floor((maxTokens * BYTES_PER_TOKEN) / 2) : 400_000;
  let perEvent = Math.max(200, Math.min(8_000, Math.floor(roomChars / Math.max(1, texts.length))));
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await llm.complete(
        {
          system: summarySystem,
          messages: [{ role: "user", text: summaryPrompt(texts.map((t) => cut(t, perEvent))) }],
          tools: [],
        },
        signal,
      );
      return { text: response.text.trim() || "(the summarizer wrote nothing)", response };
    } catch (err) {
      if (!(err instanceof LlmContextLengthError) || attempt >= 2) throw err;
      perEvent = Math.max(100, Math.floor(perEvent / 2));
    }
  }
};
