import { describe, expect, it } from "vitest";
import type { LlmMessage } from "./types.ts";
import { acceptsImages, imagesFor } from "./vision.ts";

describe("which models take images", () => {
  it("knows the families that do, and gives the others a note in place of each image", () => {
    for (const m of ["claude-sonnet-4-5", "anthropic/claude-opus-4-1", "claude-3-5-haiku", "gpt-4o", "gpt-4.1-mini"])
      expect(acceptsImages(m), m).toBe(true);
    for (const m of ["gpt-5", "o3", "o4-mini", "o1", "gemini-2.5-pro", "openai/gpt-5-mini"])
      expect(acceptsImages(m), m).toBe(true);
    for (const m of ["deepseek-chat", "gpt-3.5-turbo", "o3-mini", "o1-mini", "llama-3.1-70b", "scripted"])
      expect(acceptsImages(m), m).toBe(false);

    const messages: LlmMessage[] = [
      { role: "user", text: "Look.", images: ["data:image/png;base64,AAAA"] },
      { role: "assistant", text: "", toolCalls: [{ id: "c", name: "file_editor", arguments: "{}" }] },
      { role: "tool", toolCallId: "c", toolName: "file_editor", text: "", isError: false, images: ["a", "b"] },
    ];
    expect(imagesFor("gpt-4o", messages)).toBe(messages);
    expect(imagesFor("deepseek-chat", messages)).toEqual([
      { role: "user", text: "Look.\n[An image was left out here: the model deepseek-chat does not accept images.]" },
      messages[1],
      {
        role: "tool",
        toolCallId: "c",
        toolName: "file_editor",
        text: "[2 images were left out here: the model deepseek-chat does not accept images.]",
        isError: false,
      },
    ]);
    // A model the table does not know: the user's own images go as sent, a tool's get the note.
    expect(imagesFor("scripted", messages)).toEqual([
      messages[0],
      messages[1],
      {
        role: "tool",
        toolCallId: "c",
        toolName: "file_editor",
        text: "[2 images were left out here: the model scripted does not accept images.]",
        isError: false,
      },
    ]);
  });
});
