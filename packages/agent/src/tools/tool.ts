import type { Conversation, Observation, SecurityRisk } from "@tern/core";
import type { z } from "zod";
import type { GitToolRunner } from "./git.ts";
import type { TaskItem } from "./task-tracker.ts";
import type { TerminalToolContext } from "./terminal/tool.ts";

/**
 * What the loop asks of a tool, so that it never keeps sets of tool names. When a step's results
 * are written follows from these (dispatch.ts): results are held and written together while the
 * calls after them take no noticeable time, and written before a call that can run for minutes.
 */
export interface ToolTraits {
  /** Touches nothing and takes no time: its result is written with the call itself (think, finish). */
  instant: boolean;
  /** Can run for minutes: results held before it are written first, so a viewer never waits for them. */
  slow: boolean;
  /**
   * Running the call again gives its first result (the sandbox's run-once record, or a pure function
   * of the stored events), so its result may be held. False (run on the worker, with effects): its
   * result is the only trace that it ran, and is stored the moment it exists.
   */
  recorded: boolean;
  /** Runs in the conversation's sandbox: a run whose sandbox is gone cannot run it. */
  needsSandbox: boolean;
  /** Reads the stored events (task_tracker's plan): results held before it are stored first. */
  readsStoredEvents: boolean;
  /** The ActionEvent's `action.kind` (OpenHands' action class name). */
  actionKind: string;
  /** The risk of a call when nothing better is known of it (for a risk analyzer to start from). */
  defaultRisk: SecurityRisk;
}

/** How OpenHands' agent server names the tool, when a client may name it there. */
interface AgentServerNames {
  /** The names a StartConversationRequest may give it (the SDK's tool name and class names). */
  names: readonly string[];
  /** One of the SDK's default tools (AgentBase.include_default_tools), offered without being named. */
  default?: boolean;
}

/** A terminal call's context, and what the other tools need besides. */
export interface ToolContext extends TerminalToolContext {
  /** Runs git_push and create_pull_request on the worker; absent: those tools answer that they cannot run. */
  git?: GitToolRunner;
  conversation?: Conversation;
  /** The plan in force (task_tracker), read from the stored events; absent: none yet. */
  currentTaskList?: () => Promise<TaskItem[]>;
}

export interface ToolOutcome {
  /** What the model reads as the tool's result. */
  text: string;
  isError: boolean;
  /** The ObservationEvent's `observation`. */
  observation: Observation;
  /** The call's result is not there yet (ToolContext.attachMs passed): store nothing, ask again later. */
  pending?: boolean;
}

/** One built-in tool: its schema, its description to the model, its traits and its executor, together. */
export interface ToolSpec<Name extends string = string, Args extends z.ZodType = z.ZodType> {
  name: Name;
  description: string;
  args: Args;
  traits: ToolTraits;
  agentServer?: AgentServerNames;
  run(args: z.infer<Args>, ctx: ToolContext): Promise<ToolOutcome>;
}

/** Declares a tool (keeps its name and argument types for the registry). */
export const defineTool = <const Name extends string, Args extends z.ZodType>(
  spec: ToolSpec<Name, Args>,
): ToolSpec<Name, Args> => spec;

export const textContent = (text: string) => [{ type: "text" as const, text }];

/** The traits of a tool that only speaks (finish, think): answered at once, recorded, touching nothing. */
export const speechTraits = <K extends string>(actionKind: K) =>
  ({
    instant: true,
    slow: false,
    recorded: true,
    needsSandbox: false,
    readsStoredEvents: false,
    actionKind,
    defaultRisk: "LOW",
  }) as const;

/** What an MCP tool is to the loop: run from the worker (or its own stdio server), never recorded. */
export const mcpToolTraits: ToolTraits = {
  instant: false,
  slow: true,
  recorded: false,
  needsSandbox: false,
  readsStoredEvents: false,
  actionKind: "MCPToolAction",
  defaultRisk: "UNKNOWN",
};
