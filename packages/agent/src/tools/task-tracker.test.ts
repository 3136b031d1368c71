import { newEvent, type StoredEvent } from "@tern/core";
import { describe, expect, it } from "vitest";
import { currentTaskList, runTaskTracker, taskTrackerArgs } from "./task-tracker.ts";

const asStored = (d: { kind: string; source: string; payload: unknown }, seq: number): StoredEvent =>
  ({ ...d, id: `e${seq}`, conversationId: "c", seq, timestamp: "2026-01-01T00:00:00.000000Z" }) as StoredEvent;

describe("task_tracker", () => {
  it("takes OpenHands' arguments, with defaults for notes and status, and refuses a plan without tasks", () => {
    expect(taskTrackerArgs.parse({ command: "plan", task_list: [{ title: "a" }] })).toEqual({
      command: "plan",
      task_list: [{ title: "a", notes: "", status: "todo" }],
    });
    expect(taskTrackerArgs.parse({})).toEqual({ command: "view", task_list: [] });
    expect(taskTrackerArgs.safeParse({ command: "plan", task_list: [] }).success).toBe(false);
    expect(taskTrackerArgs.safeParse({ command: "plan", task_list: [{ title: "a", status: "blocked" }] }).success).toBe(
      false,
    );
  });

  it("plan replaces the list; view reads the plan in force, derived from the latest result", () => {
    const plan = runTaskTracker(
      taskTrackerArgs.parse({ command: "plan", task_list: [{ title: "Write tests", status: "in_progress" }] }),
      [],
    );
    expect(plan.observation).toMatchObject({ kind: "TaskTrackerObservation", command: "plan" });
    const events = [
      asStored(
        newEvent.observation({
          tool_name: "task_tracker",
          tool_call_id: "1",
          action_id: "a",
          observation: plan.observation,
        }),
        1,
      ),
      asStored(
        newEvent.observation({
          tool_name: "terminal",
          tool_call_id: "2",
          action_id: "b",
          observation: { kind: "TerminalObservation", content: [] },
        }),
        2,
      ),
    ];
    const current = currentTaskList(events);
    expect(current).toEqual([{ title: "Write tests", notes: "", status: "in_progress" }]);
    const view = runTaskTracker(taskTrackerArgs.parse({ command: "view" }), current);
    expect(view.text).toContain("1. [~] Write tests (in progress)");
    expect(view.observation.task_list).toEqual(current);
    expect(runTaskTracker(taskTrackerArgs.parse({}), []).text).toContain("No task list yet");
  });
});
