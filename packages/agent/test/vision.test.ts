import { randomUUID } from "node:crypto";
import { type StoredEventOf, textOfContent } from "@tern/core";
import { fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LlmProvider } from "../src/llm/types.ts";
import { runAgent } from "../src/loop.ts";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * Images past the first message: a PNG viewed with file_editor in a real sandbox reaches the
 * (strict) scripted model as an image, in each provider's shape, and a model that takes no images
 * gets a note in its place.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

// A 1×1 PNG.
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const path = `${workspaceDir}/pixel.png`;

/** A run where the model views the PNG, then answers; gives the request that carried the result. */
const viewPng = async (provider: LlmProvider, model: string) => {
  const { conversationId, sandboxRef } = await fx.newConversation({ message: "What is in pixel.png?" });
  await fx.exec(sandboxRef, `echo ${PNG} | base64 -d > ${path}`);
  fx.llm.push(
    { toolCalls: [{ name: "file_editor", arguments: { command: "view", path } }] },
    { text: "A single pixel." },
  );
  const deps = fx.depsFor(provider);
  await runAgent({ ...deps, settings: { ...deps.settings, LLM_MODEL: model } }, conversationId, randomUUID());
  const conversation = await fx.conversation(conversationId);
  expect(conversation.executionStatus).toBe("finished");
  const events = await fx.events(conversationId);
  const observation = events.find((e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent");
  const request = fx.llm.requests.at(-1);
  expect(request?.body.model).toBe(model);
  return {
    observation: observation?.payload.observation,
    messages: request?.body.messages as Record<string, unknown>[],
  };
};

describe("file_editor viewing an image", () => {
  it("stores the image in the observation, and gives it to Claude inside the tool_result", async () => {
    const { observation, messages } = await viewPng("anthropic", "claude-sonnet-4-5");
    expect(observation?.is_error).toBe(false);
    expect(observation?.content).toEqual([
      {
        type: "text",
        text: expect.stringMatching(/^Image file .*pixel\.png read successfully \(image\/png, 70 bytes\)/),
      },
      { type: "image", image_urls: [`data:image/png;base64,${PNG}`] },
    ]);
    const results = messages.flatMap((m) =>
      Array.isArray(m.content) ? (m.content as Record<string, unknown>[]).filter((b) => b.type === "tool_result") : [],
    );
    expect(results).toHaveLength(1);
    expect(results[0]?.content).toEqual([
      { type: "text", text: expect.stringMatching(/read successfully/) },
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
    ]);
  });

  it("gives it to GPT-4o in a user message right after the tool message, which carries text only", async () => {
    const { messages } = await viewPng("openai", "gpt-4o");
    const at = messages.findIndex((m) => m.role === "tool");
    expect(messages[at]?.content).toMatch(/read successfully/);
    expect(messages[at + 1]).toEqual({
      role: "user",
      content: [
        { type: "text", text: expect.stringMatching(/^The image shown by tool call .+ \(file_editor\):$/) },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG}` } },
      ],
    });
  });

  it("gives a model that takes no images a note instead", async () => {
    const { observation, messages } = await viewPng("openai", "deepseek-chat");
    expect(textOfContent(observation?.content ?? [])).toMatch(/read successfully/);
    const tool = messages.find((m) => m.role === "tool");
    expect(tool?.content).toMatch(/An image was left out here: the model deepseek-chat does not accept images/);
    expect(JSON.stringify(messages)).not.toContain("image_url");
    expect(JSON.stringify(messages)).not.toContain(PNG);
  });
});
