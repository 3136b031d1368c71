import type { SystemPromptTool } from "@tern/core";
import { z } from "zod";
import type { ToolDefinition } from "../llm/types.ts";
import { createPullRequestArgs, gitPushArgs, gitToolDescriptions } from "./git.ts";
import { invokeSkillArgs, invokeSkillDescription } from "./invoke-skill.ts";
import { taskTrackerArgs, taskTrackerDescription } from "./task-tracker.ts";
import { terminalArgs, terminalDescription } from "./terminal/definition.ts";

export { terminalArgs };

export const fileEditorArgs = z
  .object({
    command: z.enum(["view", "create", "str_replace", "insert", "undo_edit"]).describe("What to do with `path`."),
    path: z.string().min(1).describe("Absolute path of a file or directory inside the workspace."),
    file_text: z.string().optional().describe("`create`: the content of the new file."),
    old_str: z.string().min(1).optional().describe("`str_replace`: the exact text to replace; must occur once."),
    new_str: z.string().optional().describe("`str_replace`: the replacement; `insert`: the text to insert."),
    insert_line: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("`insert`: insert `new_str` after this line (0: at the top)."),
    view_range: z
      // An array rather than a tuple: `prefixItems` is more JSON Schema than some providers take.
      .array(z.number().int().min(-1))
      .length(2)
      .optional()
      .describe("`view` of a file: [first, last] line to show, 1-based; last -1 means the end."),
  })
  .superRefine((a, ctx) => {
    const need = (field: keyof typeof a) => {
      if (a[field] === undefined) ctx.addIssue({ code: "custom", path: [field], message: `required by ${a.command}` });
    };
    if (a.command === "create") need("file_text");
    if (a.command === "str_replace") need("old_str");
    if (a.command === "insert") {
      need("insert_line");
      need("new_str");
    }
  });

export const thinkArgs = z.object({
  thought: z.string().describe("Your reasoning, kept in the history; changes nothing."),
});

export const finishArgs = z.object({
  message: z.string().describe("A short summary of what was done, for the user."),
});

export const toolArgs = {
  terminal: terminalArgs,
  file_editor: fileEditorArgs,
  think: thinkArgs,
  finish: finishArgs,
  git_push: gitPushArgs,
  create_pull_request: createPullRequestArgs,
  task_tracker: taskTrackerArgs,
  invoke_skill: invokeSkillArgs,
} as const;

export type ToolName = keyof typeof toolArgs;
export type ToolArgs<N extends ToolName> = z.infer<(typeof toolArgs)[N]>;

export const isToolName = (name: string): name is ToolName => Object.hasOwn(toolArgs, name);

const descriptions: Record<ToolName, string> = {
  terminal: terminalDescription,
  file_editor:
    "View, create and edit files in the workspace: `view` shows a file with line numbers or lists a directory, " +
    "`create` writes a new file, `str_replace` replaces one exact occurrence, `insert` adds text after a line, " +
    "`undo_edit` reverts the last edit of a file.",
  think: "Think about something without changing anything, e.g. to plan or to weigh options.",
  finish: "Call when the task is done, with a short summary for the user.",
  ...gitToolDescriptions,
  task_tracker: taskTrackerDescription,
  invoke_skill: invokeSkillDescription,
};

const jsonSchemaOf = (schema: z.ZodType): Record<string, unknown> => {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  return rest;
};

/** The tools offered to the model, in OpenHands' names; also stored in the SystemPromptEvent. */
export const toolDefinitions: ToolDefinition[] = (Object.keys(toolArgs) as ToolName[]).map((name) => ({
  name,
  description: descriptions[name],
  parameters: jsonSchemaOf(toolArgs[name]),
}));

/** Tool definitions in the shape the SystemPromptEvent stores them (OpenAI's function tools). */
export const systemPromptTools = (): SystemPromptTool[] =>
  toolDefinitions.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
