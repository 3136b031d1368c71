import type { StoredEvent } from "@tern/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { currentTaskList, taskListOf } from "../src/tools/task-tracker.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

// task_tracker through the real loop: its calls and results are stored as events like any tool's,
// and the plan in force is read back from them, within one response and in a later run.

let fx: RunFixture;
beforeAll(async () => {
  fx = await createRunFixture();
}, 60_000);
afterAll(async () => {
  await fx?.close();
});

const plan = (tasks: { title: string; status?: string; notes?: string }[]) => ({
  name: "task_tracker",
  arguments: { command: "plan", task_list: tasks },
});
const view = { name: "task_tracker", arguments: { command: "view" } };

const trackerResults = (events: StoredEvent[]) =>
  events.filter((e) => e.kind === "ObservationEvent" && e.payload.tool_name === "task_tracker");

describe("task_tracker", () => {
  it("stores each plan as an action and its result; view reads the plan in force, in the same response and in a later run", async () => {
    const { conversationId } = await fx.newConversation({ message: "Fix the parser, then add tests." });
    fx.llm.push(
      {
        toolCalls: [
          plan([{ title: "Fix the parser", status: "in_progress", notes: "the comma case" }, { title: "Add tests" }]),
          view,
        ],
      },
      { text: "Planned." },
    );
    const first = await fx.run(conversationId, "openai");
    expect(first.conversation.executionStatus).toBe("finished");
    let events = await fx.events(conversationId);
    const actions = events.filter((e) => e.kind === "ActionEvent" && e.payload.tool_name === "task_tracker");
    expect(actions.map((e) => (e.kind === "ActionEvent" ? e.payload.action.kind : null))).toEqual([
      "TaskTrackerAction",
      "TaskTrackerAction",
    ]);
    const [planned, viewed] = trackerResults(events);
    const expected = [
      { title: "Fix the parser", notes: "the comma case", status: "in_progress" },
      { title: "Add tests", notes: "", status: "todo" },
    ];
    expect(taskListOf(planned as StoredEvent)).toEqual(expected);
    // The view in the same response saw the plan just made (it was stored before the view ran).
    expect(taskListOf(viewed as StoredEvent)).toEqual(expected);
    expect(JSON.stringify(fx.llm.requests.at(-1)?.body)).toContain("1. [~] Fix the parser (in progress)");

    // A later run (any worker) reads the same plan from the stored events, then updates it.
    await fx.sayToAgent(conversationId, "How far along are you?");
    fx.llm.push(
      { toolCalls: [view] },
      {
        toolCalls: [
          plan([
            { title: "Fix the parser", status: "done" },
            { title: "Add tests", status: "in_progress" },
          ]),
        ],
      },
      { text: "Halfway." },
    );
    const second = await fx.run(conversationId, "openai");
    expect(second.conversation.executionStatus).toBe("finished");
    events = await fx.events(conversationId);
    const results = trackerResults(events);
    expect(taskListOf(results[2] as StoredEvent)).toEqual(expected);
    expect(currentTaskList(events).map((t) => t.status)).toEqual(["done", "in_progress"]);
  }, 90_000);

  it("a plan without tasks is refused as a bad call the model reads; the plan in force stays", async () => {
    const { conversationId } = await fx.newConversation({ message: "Plan it." });
    fx.llm.push(
      { toolCalls: [{ name: "task_tracker", arguments: { command: "plan", task_list: [] } }] },
      { text: "Ok." },
    );
    await fx.run(conversationId, "openai");
    const events = await fx.events(conversationId);
    const error = events.find((e) => e.kind === "AgentErrorEvent");
    expect(error?.kind === "AgentErrorEvent" && error.payload.error).toContain("plan needs the full task list");
    expect(currentTaskList(events)).toEqual([]);
  }, 60_000);
});
