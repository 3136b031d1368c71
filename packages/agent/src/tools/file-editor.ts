import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { posix } from "node:path";
import type { MessageContent, Observation } from "@tern/core";
import { z } from "zod";
import { runOnce, type SandboxCallContext } from "./run-once.ts";
import { defineTool } from "./tool.ts";

/**
 * `file_editor` (OpenHands' tool of that name): view, create and edit files anywhere in the
 * sandbox. The work is done by file_editor.py, run once per action inside the sandbox, which
 * refuses binary files and files over 10 MB, keeps a file's encoding and line ends, and shows
 * images (PNG, JPEG, GIF, WebP) as image blocks of the observation.
 */
const fileEditorArgs = z
  .object({
    command: z
      .enum(["view", "create", "str_replace", "insert", "undo_edit"])
      .describe("The command to run: `view`, `create`, `str_replace`, `insert` or `undo_edit`."),
    path: z
      .string()
      .min(1)
      .describe(
        "Absolute path of a file or directory, e.g. `/workspace/repo/file.py` (a relative one is taken from the workspace).",
      ),
    file_text: z.string().optional().describe("Required by `create`: the content of the file to create."),
    old_str: z
      .string()
      .min(1)
      .optional()
      .describe("Required by `str_replace`: the text in `path` to replace; it must occur exactly once."),
    new_str: z
      .string()
      .optional()
      .describe(
        "`str_replace`: the text that replaces `old_str` (none given: `old_str` is deleted). Required by `insert`: " +
          "the text to insert.",
      ),
    insert_line: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Required by `insert`: `new_str` is inserted AFTER this line of `path` (0: at the top)."),
    view_range: z
      // An array rather than a tuple: `prefixItems` is more JSON Schema than some providers take.
      .array(z.number().int().min(-1))
      .length(2)
      .optional()
      .describe(
        "Optional for `view` of a file: the lines to show, 1-based and inclusive, e.g. [11, 12] shows lines 11 and " +
          "12; [start, -1] shows from `start` to the end. Without it the whole file is shown.",
      ),
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

type FileEditorArgs = z.infer<typeof fileEditorArgs>;

/** What the model is told of the tool: what OpenHands' description covers, in our words. */
const fileEditorDescription = `Views, creates and edits plain-text files, and shows images.
* Its state lasts across calls: an edit stays made, and \`undo_edit\` can take it back.
* \`view\` on a text file shows it with line numbers, as \`cat -n\` does; on a directory it lists the files and directories up to 2 levels deep, leaving out hidden ones (it says how many it left out).
* \`view\` on an image (.png, .jpg, .jpeg, .gif, .webp) shows you the image, when your model accepts images.
* \`create\` makes a new file, with its parent directories; it refuses a path that already exists.
* \`str_replace\` replaces \`old_str\` with \`new_str\`; \`insert\` adds \`new_str\` after line \`insert_line\`.
* \`undo_edit\` reverts the last edit made to the file at \`path\`.
* Long output is cut and marked with \`<response clipped>\`. Binary files and files over 10 MB are refused: use the terminal for those.
* A file keeps its encoding (UTF-8, Latin-1, UTF-16, …) and its line ends when edited.
* Any path in the sandbox may be used; give absolute paths (starting with /).

Before editing:
1. View the file first, to know its content and context.
2. When creating a file, make sure its directory is the right place (view the parent directory).

When editing:
* Leave the code correct and idiomatic, never half-changed.
* \`old_str\` must match one or more whole, consecutive lines of the file EXACTLY, whitespace and indentation included. If it matches nowhere, the tool tries once more with \`old_str\` stripped of leading and trailing whitespace.
* \`old_str\` must be UNIQUE in the file: include enough context around the change (3 to 5 lines) to single it out. With no match, or more than one, nothing is replaced and you are told why.
* \`new_str\` holds the edited lines that take the place of \`old_str\`; the two must differ.
* Several edits to one file: send them as several calls in one message rather than one call per message.`;

const script = readFileSync(new URL("./file_editor.py", import.meta.url), "utf8");

/** How long one action may take in the sandbox. */
const TIMEOUT_SEC = 60;
/** file_editor.py's own limit on images (Anthropic refuses larger ones), as base64, with room for the text. */
const MAX_IMAGE_OUTPUT_BYTES = Math.ceil((5 * 1024 * 1024 * 4) / 3) + 64 * 1024;
const IMAGE_EXTENSION = /\.(png|jpe?g|gif|webp)$/i;

interface FileEditorOutcome {
  text: string;
  isError: boolean;
  observation: Observation;
}

/** `path` as an absolute, normalised path: a relative one is taken from the workspace. */
const resolveEditorPath = (workspaceDir: string, path: string): string =>
  posix.normalize(posix.isAbsolute(path) ? path : posix.join(workspaceDir, path));

/** The script's output: its text, and an image when it printed one after `marker`. */
const parseOutput = (output: string, marker: string): { text: string; image: string | null } => {
  const at = output.indexOf(`\n${marker} `);
  if (at < 0) return { text: output, image: null };
  const [mime = "", data = ""] = output
    .slice(at + marker.length + 2)
    .trim()
    .split("\n");
  return { text: output.slice(0, at), image: `data:${mime.trim()};base64,${data.trim()}` };
};

/** Runs one file_editor call in the sandbox, once per action (run-once.ts). */
const runFileEditor = async (args: FileEditorArgs, ctx: SandboxCallContext): Promise<FileEditorOutcome> => {
  const path = resolveEditorPath(ctx.workspaceDir, args.path);
  const image = args.command === "view" && IMAGE_EXTENSION.test(path);
  // A fresh marker per call: no file's text can fake an image.
  const marker = `TERN_IMAGE_${randomBytes(8).toString("hex")}`;
  const payload = Buffer.from(JSON.stringify({ ...args, path, ...(image ? { image_marker: marker } : {}) })).toString(
    "base64",
  );
  const program = `${script}\nimport json\nmain(json.loads(base64.b64decode("${payload}").decode()))\n`;
  const r = await runOnce({
    ...ctx,
    env: {},
    interpreter: "python3",
    program,
    cwd: ctx.workspaceDir,
    timeoutSec: TIMEOUT_SEC,
    maxOutputBytes: image ? Math.max(ctx.maxOutputBytes, MAX_IMAGE_OUTPUT_BYTES) : ctx.maxOutputBytes,
  });
  const isError = r.exitCode !== 0;
  const parsed =
    image && !isError && r.cutBytes === 0 ? parseOutput(r.output, marker) : { text: r.output, image: null };
  let text = parsed.text.replace(/\n$/, "");
  if (r.cutBytes > 0) text += `\n[Output was cut: ${r.cutBytes} bytes in the middle were left out.]`;
  if (r.timedOut) text = `The file editor did not finish within ${TIMEOUT_SEC} seconds.`;
  const content: MessageContent[] = [{ type: "text", text }];
  if (parsed.image) content.push({ type: "image", image_urls: [parsed.image] });
  return {
    text,
    isError,
    observation: { kind: "FileEditorObservation", command: args.command, path, content, is_error: isError },
  };
};

/** `file_editor`: OpenHands' FileEditorTool, run once in the sandbox (file_editor.py). */
export const fileEditorTool = defineTool({
  name: "file_editor",
  description: fileEditorDescription,
  args: fileEditorArgs,
  traits: {
    instant: false,
    slow: false,
    recorded: true,
    needsSandbox: true,
    readsStoredEvents: false,
    actionKind: "FileEditorAction",
    defaultRisk: "MEDIUM",
  },
  agentServer: { names: ["file_editor", "FileEditorTool"] },
  run: runFileEditor,
});
