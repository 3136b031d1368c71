import type { Observation, StoredEvent } from "@tern/core";
import { z } from "zod";
import { defineTool } from "./tool.ts";

/**
 * `task_tracker` (OpenHands' tool of that name): the agent's plan, a list of tasks it rewrites
 * whole with `plan` and reads with `view`. Its calls and results are the ActionEvent and
 * ObservationEvent pair like any tool's; the current plan is the `task_list` of the latest
 * successful result (`currentTaskList`), so any worker, and the conversation page, derive it from
 * the stored events alone.
 */
export const taskStatuses = ["todo", "in_progress", "done"] as const;

const taskItem = z.object({
  title: z.string().min(1).max(500).describe("A short title for the task."),
  notes: z.string().max(4000).default("").describe("Details or notes about the task."),
  status: z.enum(taskStatuses).default("todo").describe("`todo`, `in_progress` (one at a time) or `done`."),
});
export type TaskItem = z.infer<typeof taskItem>;

export const taskTrackerArgs = z
  .object({
    command: z
      .enum(["view", "plan"])
      .default("view")
      .describe("`view` shows the current task list; `plan` replaces it with `task_list`."),
    task_list: z
      .array(taskItem)
      .max(100)
      .default([])
      .describe("`plan`: the full task list, in order, with each task's status."),
  })
  .superRefine((a, ctx) => {
    if (a.command === "plan" && a.task_list.length === 0) {
      ctx.addIssue({ code: "custom", path: ["task_list"], message: "plan needs the full task list" });
    }
  });

const taskTrackerDescription =
  "Your plan for work with several steps, shown to the user. `plan` writes the whole task list (each task with " +
  "`title`, `notes` and `status`: todo, in_progress or done); `view` reads it back. Use it for multi-step " +
  "work, not for a single simple change. Plan at the start, keep exactly one task in_progress, mark a task " +
  "done as soon as it is (never while its tests fail), and add tasks you discover on the way.";

const icon = { todo: "[ ]", in_progress: "[~]", done: "[x]" } as const;

/** The task list as the model reads it. */
export const formatTaskList = (tasks: TaskItem[]): string =>
  tasks.length === 0
    ? 'No task list yet. Use the "plan" command to create one.'
    : tasks
        .map(
          (t, i) =>
            `${i + 1}. ${icon[t.status]} ${t.title}${t.status === "in_progress" ? " (in progress)" : ""}${t.notes ? `\n   ${t.notes}` : ""}`,
        )
        .join("\n");

const observedTaskList = z.object({ task_list: z.array(taskItem) });

/** The plan a TaskTrackerObservation holds, or null when the event is not one (or failed). */
export const taskListOf = (e: StoredEvent): TaskItem[] | null => {
  if (e.kind !== "ObservationEvent" || e.payload.tool_name !== "task_tracker" || e.payload.observation.is_error) {
    return null;
  }
  const parsed = observedTaskList.safeParse(e.payload.observation);
  return parsed.success ? parsed.data.task_list : null;
};

/** The current plan: the task list of the latest task_tracker result among `events` (in order). */
export const currentTaskList = (events: StoredEvent[]): TaskItem[] => {
  for (let i = events.length - 1; i >= 0; i--) {
    const list = taskListOf(events[i] as StoredEvent);
    if (list) return list;
  }
  return [];
};

/** Runs a task_tracker call against the current plan; the result carries the plan in force after it. */
export const runTaskTracker = (
  args: z.infer<typeof taskTrackerArgs>,
  current: TaskItem[],
): { text: string; observation: Observation } => {
  const taskList = args.command === "plan" ? args.task_list : current;
  const text =
    args.command === "plan"
      ? `The task list now has ${taskList.length} task(s):\n${formatTaskList(taskList)}`
      : formatTaskList(taskList);
  return {
    text,
    observation: {
      kind: "TaskTrackerObservation",
      command: args.command,
      task_list: taskList,
      content: [{ type: "text", text }],
      is_error: false,
    },
  };
};

/** `task_tracker`: OpenHands' TaskTrackerTool; the plan in force is read from the stored events. */
export const taskTrackerTool = defineTool({
  name: "task_tracker",
  description: taskTrackerDescription,
  args: taskTrackerArgs,
  traits: {
    instant: false,
    slow: false,
    recorded: true,
    needsSandbox: false,
    readsStoredEvents: true,
    actionKind: "TaskTrackerAction",
    defaultRisk: "LOW",
  },
  agentServer: { names: ["task_tracker", "TaskTrackerTool"] },
  run: async (args, ctx) => {
    const r = runTaskTracker(args, (await ctx.currentTaskList?.()) ?? []);
    return { text: r.text, isError: false, observation: r.observation };
  },
});
