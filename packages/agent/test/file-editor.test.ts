import { type StoredEventOf, textOfContent } from "@tern/core";
import { fixtureWorkspaceDir as workspaceDir } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRunFixture, type RunFixture } from "./run-fixture.ts";

/**
 * file_editor as OpenHands' behaves, in a real sandbox through the loop: encodings kept, binary
 * and oversized files refused, `old_str` retried stripped, hidden entries counted, any path.
 */
let fx: RunFixture;

beforeAll(async () => {
  fx = await createRunFixture();
});

afterAll(async () => {
  await fx?.close();
});

const edit = (args: Record<string, unknown>) => ({ name: "file_editor", arguments: args });

/** Runs the calls as one response, then a final answer; gives each call's result. */
const runCalls = async (
  calls: ReturnType<typeof edit>[],
  files?: Record<string, string>,
  setup?: string,
): Promise<{ results: { text: string; isError: boolean }[]; sandboxRef: string }> => {
  const { conversationId, sandboxRef } = await fx.newConversation({
    message: "Edit files.",
    ...(files ? { files } : {}),
  });
  if (setup) await fx.exec(sandboxRef, setup);
  fx.llm.push({ toolCalls: calls }, { text: "done" });
  const { conversation } = await fx.run(conversationId, "openai");
  expect(conversation.executionStatus).toBe("finished");
  const observations = (await fx.events(conversationId)).filter(
    (e): e is StoredEventOf<"ObservationEvent"> => e.kind === "ObservationEvent",
  );
  return {
    sandboxRef,
    results: observations.map((o) => ({
      text: textOfContent(o.payload.observation.content),
      isError: o.payload.observation.is_error === true,
    })),
  };
};

describe("file_editor", () => {
  it("edits a Latin-1 file and leaves it Latin-1, its other bytes untouched", async () => {
    const path = `${workspaceDir}/legacy.txt`;
    const { results, sandboxRef } = await runCalls(
      [
        edit({ command: "view", path }),
        edit({ command: "str_replace", path, old_str: "prix: 5", new_str: "prix: 7 (été)" }),
      ],
      undefined,
      // "café crème\nprix: 5 €uros\n" with é = E9, è = E8 (Latin-1), and a CRLF line end kept too.
      `printf 'caf\\xe9 cr\\xe8me\\r\\nprix: 5 euros\\r\\n' > ${path}`,
    );
    expect(results.map((r) => r.isError)).toEqual([false, false]);
    // Read as text, not as replacement characters.
    expect(results[0]?.text).toContain("café crème");
    expect(results[1]?.text).toContain("prix: 7 (été) euros");
    const hex = (await fx.exec(sandboxRef, `od -An -tx1 ${path} | tr -d ' \\n'`)).trim();
    const expected = Buffer.from("caf\xe9 cr\xe8me\r\nprix: 7 (\xe9t\xe9) euros\r\n", "latin1").toString("hex");
    expect(hex).toBe(expected);
  });

  it("refuses a binary file, a file over 10 MB, and keeps old_str stripped as a second try", async () => {
    const bin = `${workspaceDir}/tool.bin`;
    const big = "/tmp/big.log";
    const app = `${workspaceDir}/app.py`;
    const { results, sandboxRef } = await runCalls(
      [
        edit({ command: "view", path: bin }),
        edit({ command: "str_replace", path: bin, old_str: "ELF", new_str: "FLE" }),
        edit({ command: "view", path: big }),
        // The model copied a trailing newline and an indentation the text does not have there.
        edit({ command: "str_replace", path: app, old_str: "    return 'hello'\n\n", new_str: "return 'bonjour'" }),
        edit({ command: "str_replace", path: app, old_str: "  nowhere  ", new_str: "x" }),
      ],
      { "app.py": "def greet():\n    return 'hello'\n" },
      `head -c 4096 /bin/ls > ${bin} && truncate -s 11M ${big}`,
    );
    expect(results.map((r) => r.isError)).toEqual([true, true, true, false, true]);
    expect(results[0]?.text).toMatch(/appears to be binary/);
    expect(results[1]?.text).toMatch(/appears to be binary/);
    expect(results[2]?.text).toMatch(/too large \(11\.0 MB\).*up to 10 MB/);
    expect(results[4]?.text).toMatch(/old_str `nowhere` did not appear verbatim/);
    // Stripped, `return 'hello'` matched; new_str went in as given, and the indentation before it stayed.
    expect(await fx.exec(sandboxRef, `cat ${app}`)).toBe("def greet():\n    return 'bonjour'\n");
    expect(await fx.exec(sandboxRef, `head -c 4 ${bin} | od -An -c | tr -d ' \\n'`)).toBe("177ELF");
  });

  it("counts the hidden entries of a directory it lists, and works on paths outside the workspace", async () => {
    const { results, sandboxRef } = await runCalls(
      [
        edit({ command: "view", path: workspaceDir }),
        edit({ command: "create", path: "/tmp/notes/todo.md", file_text: "- one\n" }),
        edit({ command: "insert", path: "/tmp/notes/todo.md", insert_line: 1, new_str: "- two" }),
        edit({ command: "view", path: "/tmp/notes" }),
      ],
      { "src/main.py": "print(1)\n", ".env.example": "A=1\n" },
    );
    expect(results.map((r) => r.isError)).toEqual([false, false, false, false]);
    // .git and .env.example are hidden; src/main.py is shown two levels down.
    expect(results[0]?.text).toContain(`${workspaceDir}/src/main.py`);
    expect(results[0]?.text).not.toContain(".env.example");
    expect(results[0]?.text).toMatch(
      new RegExp(`2 hidden files/directories in this directory are excluded. You can use 'ls -la ${workspaceDir}'`),
    );
    expect(results[3]?.text).toContain("/tmp/notes/todo.md");
    expect(results[3]?.text).not.toMatch(/hidden files\/directories in this directory/);
    expect(await fx.exec(sandboxRef, "cat /tmp/notes/todo.md")).toBe("- one\n- two\n");
  });
});
