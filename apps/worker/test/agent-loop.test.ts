import type { StoredEvent } from "@tern/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentFixture,
  createAgentFixture,
  kindsOf,
  type Provider,
  statusChanges,
  workspaceDir,
} from "./agent-fixture.ts";

let fx: AgentFixture;

beforeAll(async () => {
  fx = await createAgentFixture();
});

afterAll(async () => {
  await fx?.close();
});

const call = (name: string, args: string | Record<string, unknown>) => ({ name, arguments: args });

const of = (events: StoredEvent[], kind: string) => events.filter((e) => e.kind === kind);

/** The messages the model was sent in the last request, as plain JSON text (either provider). */
const lastRequestText = () => JSON.stringify(fx.llm.requests.at(-1)?.body ?? {});

describe.each<Provider>(["openai", "anthropic"])("agent loop with %s", (provider) => {
  it("reads a repository file with a tool call and answers with its content", async () => {
    const { conversationId } = await fx.newConversation({
      files: { "README.md": "The project codename is BLUE-HERON.\n" },
      message: "What is the codename in the README?",
    });
    const before = fx.llm.requests.length;
    fx.llm.push(
      {
        text: "Let me read it.",
        toolCalls: [call("file_editor", { command: "view", path: `${workspaceDir}/README.md` })],
      },
      { text: "The codename is BLUE-HERON.", usage: { input: 100, output: 7 } },
    );
    const { conversation } = await fx.run(conversationId, provider);
    expect(conversation.executionStatus).toBe("finished");

    const events = await fx.events(conversationId);
    expect(kindsOf(events)).toEqual([
      "SystemPromptEvent",
      "MessageEvent",
      "ActionEvent",
      "ObservationEvent",
      "MessageEvent",
    ]);
    expect(statusChanges(events)).toEqual(["running", "finished"]);
    const [action] = of(events, "ActionEvent");
    const [observation] = of(events, "ObservationEvent");
    expect(action?.payload).toMatchObject({
      tool_name: "file_editor",
      thought: [{ type: "text", text: "Let me read it." }],
      action: { kind: "FileEditorAction", command: "view", path: `${workspaceDir}/README.md` },
    });
    expect(observation?.payload).toMatchObject({
      tool_name: "file_editor",
      tool_call_id: action?.payload.tool_call_id,
      action_id: action?.id,
    });
    expect(JSON.stringify(observation?.payload.observation)).toContain("BLUE-HERON");
    expect(events.at(-2)?.payload).toMatchObject({
      llm_message: { role: "assistant", content: [{ type: "text", text: "The codename is BLUE-HERON." }] },
    });
    expect(events.at(-2)?.source).toBe("agent");

    // The model got the system prompt, the tools, and the file's content back as the tool result.
    expect(fx.llm.requests.length - before).toBe(2);
    const second = fx.llm.requests.at(-1);
    expect(second?.provider).toBe(provider);
    expect(second?.stream).toBe(true);
    expect(lastRequestText()).toContain("You are the test agent.");
    expect(lastRequestText()).toContain("BLUE-HERON");
    expect(lastRequestText()).toContain(String(action?.payload.tool_call_id));
    const toolNames = ((second?.body.tools ?? []) as Record<string, unknown>[]).map(
      (t) => (t.function as { name?: string } | undefined)?.name ?? t.name,
    );
    expect(toolNames).toEqual(["terminal", "file_editor", "think", "finish"]);

    expect(conversation.metrics).toMatchObject({
      llm_calls: 2,
      prompt_tokens: 110,
      completion_tokens: 12,
      total_tokens: 122,
    });
  });
});
