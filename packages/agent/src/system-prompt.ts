import type { Skill } from "@tern/core";

export interface SystemPromptInput {
  workspaceDir: string;
  repository: string | null;
  /** Always-on skills (no triggers); triggered ones are added when a user message names a trigger. */
  skills: Skill[];
}

/** The agent's system prompt: who it is, where it works, and the repository's always-on skills. */
export const buildSystemPrompt = (input: SystemPromptInput): string => {
  const parts = [
    "You are a coding agent working in a sandboxed Linux container.",
    `Your workspace is ${input.workspaceDir}${input.repository ? `, a clone of ${input.repository}` : ", an empty git repository"}.`,
    "Use the tools to inspect and change files and run commands. Call `finish` with a short summary when done.",
  ];
  const alwaysOn = input.skills.filter((s) => s.triggers.length === 0);
  for (const s of alwaysOn)
    parts.push(`\n<skill name="${s.name}" source="${s.source}">\n${s.content.trim()}\n</skill>`);
  return parts.join("\n");
};
