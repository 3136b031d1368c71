import type { Skill } from "@tern/core";
import { parse as parseYaml } from "yaml";

/** Where a repository keeps its skills (OpenHands' places), relative to the workspace. */
export const skillGlobs = [".openhands/skills/*.md", ".openhands/microagents/*.md", "AGENTS.md"];

const FRONT_MATTER = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/;

const toStringList = (v: unknown): string[] => {
  if (typeof v === "string") return v.trim() ? [v.trim()] : [];
  if (Array.isArray(v))
    return v
      .filter((t): t is string | number => typeof t === "string" || typeof t === "number")
      .map(String)
      .map((t) => t.trim())
      .filter(Boolean);
  return [];
};

const baseName = (path: string) => path.replace(/^.*\//, "").replace(/\.md$/i, "");

/**
 * A skill from a markdown file with optional YAML front matter (`name`, `triggers`). Front matter
 * that does not parse is kept as content: a broken skill file must not stop a conversation.
 */
export const parseSkill = (source: string, text: string): Skill => {
  const m = FRONT_MATTER.exec(text);
  let meta: Record<string, unknown> = {};
  let content = text;
  if (m) {
    try {
      const parsed = parseYaml(m[1] ?? "");
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
        meta = parsed as Record<string, unknown>;
        content = text.slice(m[0].length);
      }
    } catch {
      // Not YAML after all: the whole file is the skill.
    }
  }
  const name = typeof meta.name === "string" && meta.name.trim() ? meta.name.trim() : baseName(source);
  const triggers = toStringList(meta.triggers ?? meta.trigger);
  return { name, triggers, content: content.trim(), source };
};

/** Skills a user message activates: those with a trigger the message contains (case-insensitive). */
export const skillsTriggeredBy = (skills: Skill[], message: string): Skill[] => {
  const text = message.toLowerCase();
  return skills.filter((s) => s.triggers.some((t) => text.includes(t.toLowerCase())));
};
