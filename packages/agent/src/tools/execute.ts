import type { Conversation, Observation } from "@tern/core";
import { invokedSkillText } from "../skills.ts";
import type { ToolArgs, ToolName } from "./definitions.ts";
import { runFileEditor } from "./file-editor.ts";
import { type GitToolRunner, gitObservation } from "./git.ts";
import { runTaskTracker, type TaskItem } from "./task-tracker.ts";
import { runTerminal, type TerminalToolContext } from "./terminal/tool.ts";

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

const textContent = (text: string) => [{ type: "text" as const, text }];

const terminal = (args: ToolArgs<"terminal">, ctx: ToolContext): Promise<ToolOutcome> =>
  runTerminal(args, {
    sandbox: ctx.sandbox,
    sandboxRef: ctx.sandboxRef,
    workspaceDir: ctx.workspaceDir,
    actionId: ctx.actionId,
    maxOutputBytes: ctx.maxOutputBytes,
    ...(ctx.env ? { env: ctx.env } : {}),
    ...(ctx.noChangeTimeoutSeconds ? { noChangeTimeoutSeconds: ctx.noChangeTimeoutSeconds } : {}),
    ...(ctx.attachMs ? { attachMs: ctx.attachMs } : {}),
    ...(ctx.interruptFirst ? { interruptFirst: true } : {}),
    ...(ctx.signal ? { signal: ctx.signal } : {}),
  });

/** Runs one validated tool call. `think` and `finish` touch nothing; the others run once in the sandbox. */
export const executeTool = async <N extends ToolName>(
  name: N,
  args: ToolArgs<N>,
  ctx: ToolContext,
): Promise<ToolOutcome> => {
  switch (name) {
    case "terminal":
      return terminal(args as ToolArgs<"terminal">, ctx);
    case "file_editor":
      return runFileEditor(args as ToolArgs<"file_editor">, ctx);
    case "think": {
      const text = "Your thought has been logged.";
      return { text, isError: false, observation: { kind: "ThinkObservation", content: textContent(text) } };
    }
    case "git_push":
    case "create_pull_request": {
      const kind = name === "git_push" ? "GitPushObservation" : "PullRequestObservation";
      const result =
        ctx.git && ctx.conversation
          ? name === "git_push"
            ? await ctx.git.push(
                { conversation: ctx.conversation, sandboxRef: ctx.sandboxRef },
                args as ToolArgs<"git_push">,
              )
            : await ctx.git.createPullRequest(
                { conversation: ctx.conversation, sandboxRef: ctx.sandboxRef },
                args as ToolArgs<"create_pull_request">,
              )
          : { text: `${name} is not available here.`, isError: true };
      return { text: result.text, isError: result.isError, observation: gitObservation(kind, result) };
    }
    case "task_tracker": {
      const r = runTaskTracker(args as ToolArgs<"task_tracker">, (await ctx.currentTaskList?.()) ?? []);
      return { text: r.text, isError: false, observation: r.observation };
    }
    case "invoke_skill": {
      const { name: skillName } = args as ToolArgs<"invoke_skill">;
      const r = invokedSkillText(ctx.conversation?.skills ?? [], skillName, ctx.workspaceDir);
      return {
        text: r.text,
        isError: !r.ok,
        observation: {
          kind: "InvokeSkillObservation",
          skill_name: skillName,
          content: textContent(r.text),
          is_error: !r.ok,
        },
      };
    }
    case "finish": {
      const text = (args as ToolArgs<"finish">).message;
      return { text, isError: false, observation: { kind: "FinishObservation", content: textContent(text) } };
    }
  }
  throw new Error(`unknown tool ${String(name)}`);
};
