import { posix } from "node:path";
import type { Skill, SkillMatch } from "@tern/core";

/**
 * Where each of the repository's skills reaches the model (OpenHands' rules):
 * - always on: a skill with no trigger, no path and not AgentSkills; whole, in the system prompt;
 * - listed: AgentSkills (SKILL.md) and skills with triggers; by name and description in the system
 *   prompt, read in full with `invoke_skill`;
 * - triggered: a skill with triggers, added to the user message that says one (a whole word);
 * - path rules (nested AGENTS.md, front matter `paths`): added to the result of a tool call that
 *   touched a matching file; never listed.
 */

const isPathRule = (s: Skill) => (s.paths?.length ?? 0) > 0;

/** The model families that get their own instruction file; null: a model we cannot place gets them all. */
const familyOf = (model: string | null): "claude" | "gemini" | "other" | null => {
  if (!model) return null;
  const m = model.toLowerCase();
  if (/claude|anthropic/.test(m)) return "claude";
  if (/gemini/.test(m)) return "gemini";
  if (/gpt|openai|(^|\/)o[1-9]|codex|llama|qwen|deepseek|mistral|grok|kimi|glm/.test(m)) return "other";
  return null;
};

const fileName = (source: string) => posix.basename(source).toLowerCase();

/** Always-on skills, without CLAUDE.md for a model that is not Claude, nor GEMINI.md for one that is not Gemini. */
export const alwaysOnSkills = (skills: Skill[], model: string | null): Skill[] => {
  const family = familyOf(model);
  return skills.filter((s) => {
    if (s.format === "agentskills" || s.triggers.length > 0 || isPathRule(s)) return false;
    if (family && fileName(s.source) === "claude.md" && family !== "claude") return false;
    if (family && fileName(s.source) === "gemini.md" && family !== "gemini") return false;
    return true;
  });
};

/** Skills the model is told about by name and description, and may read with `invoke_skill`. */
export const listedSkills = (skills: Skill[]): Skill[] =>
  skills.filter(
    (s) => !isPathRule(s) && !s.disableModelInvocation && (s.format === "agentskills" || s.triggers.length > 0),
  );

const MAX_DESCRIPTION_CHARS = 1024;

const xmlEscape = (s: string) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

/** The skill's description, else its first line of prose, cut to 1 024 characters. */
const descriptionOf = (s: Skill): string => {
  const text =
    s.description?.trim() ||
    s.content
      .split("\n")
      .map((l) => l.trim())
      .find((l) => l && !l.startsWith("#")) ||
    "";
  return text.length > MAX_DESCRIPTION_CHARS ? `${text.slice(0, MAX_DESCRIPTION_CHARS)}…` : text;
};

/** The listing of the repository's other skills, for the system prompt; null when there is none. */
export const availableSkillsBlock = (skills: Skill[]): string | null => {
  const listed = listedSkills(skills);
  if (listed.length === 0) return null;
  const items = listed.map(
    (s) =>
      `  <skill>\n    <name>${xmlEscape(s.name)}</name>\n    <description>${xmlEscape(descriptionOf(s))}</description>\n  </skill>`,
  );
  return (
    "<SKILLS>\nThe repository offers these skills. Some are added to a message when it names their keywords; " +
    "when one is relevant to your task, read it in full with `invoke_skill` (`name` as below) before you act.\n" +
    `<available_skills>\n${items.join("\n")}\n</available_skills>\n</SKILLS>`
  );
};

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

const globCache = new Map<string, RegExp>();

/**
 * Gitignore-style globs on workspace-relative POSIX paths: `**` crosses folders, `*` and `?` do
 * not, and a pattern without `/` matches a file name at any depth.
 */
export const pathMatchesGlob = (path: string, pattern: string): boolean => {
  if (!pattern) return false;
  let re = globCache.get(pattern);
  if (!re) {
    const full = pattern.includes("/") ? pattern : `**/${pattern}`;
    const body = (full.match(/\*\*\/|\*\*|\*|\?|[^*?]+/g) ?? [])
      .map((t) =>
        t === "**/" ? "(?:.*/)?" : t === "**" ? ".*" : t === "*" ? "[^/]*" : t === "?" ? "[^/]" : escapeRegExp(t),
      )
      .join("");
    re = new RegExp(`^${body}$`, "s");
    globCache.set(pattern, re);
  }
  return re.test(path);
};

/** `path` relative to the workspace (absolute or relative as the model gave it); null when outside it. */
export const workspaceRelative = (workspaceDir: string, path: string): string | null => {
  const root = posix.normalize(workspaceDir).replace(/\/+$/, "");
  const abs = posix.normalize(posix.isAbsolute(path) ? path : posix.join(root, path));
  if (abs === root) return ".";
  return abs.startsWith(`${root}/`) ? abs.slice(root.length + 1) : null;
};

/** Path rules that a tool call touching `relativePath` brings in. */
export const pathRulesFor = (skills: Skill[], relativePath: string): SkillMatch[] =>
  skills.flatMap((skill) => {
    const trigger = skill.paths?.find((p) => pathMatchesGlob(relativePath, p));
    return trigger ? [{ skill, trigger }] : [];
  });

/** What a triggered skill adds to the user message. */
export const triggeredSkillText = ({ skill, trigger }: SkillMatch): string =>
  `<EXTRA_INFO>\nThe following was added because the message says "${trigger}"; it may or may not be relevant.\n` +
  `<skill name="${skill.name}" source="${skill.source}">\n${skill.content.trim()}\n</skill>\n</EXTRA_INFO>`;

/** What a path rule adds to the result of the call that touched a matching file. */
export const pathRuleText = ({ skill, trigger }: SkillMatch): string =>
  `<EXTRA_INFO>\nThis rule applies because the file you touched matches "${trigger}"; follow it for files there.\n` +
  `<skill name="${skill.name}" source="${skill.source}">\n${skill.content.trim()}\n</skill>\n</EXTRA_INFO>`;

/** The result of `invoke_skill`: the skill in full, and where its folder is (an AgentSkills folder has scripts/ and references/). */
export const invokedSkillText = (
  skills: Skill[],
  name: string,
  workspaceDir: string,
): { text: string; ok: boolean } => {
  const skill = skills.find((s) => s.name === name.trim());
  if (!skill || isPathRule(skill) || skill.disableModelInvocation) {
    const names = listedSkills(skills).map((s) => s.name);
    return {
      ok: false,
      text: `There is no skill named "${name}". The skills are: ${names.length ? names.join(", ") : "none"}.`,
    };
  }
  const footer =
    skill.format === "agentskills"
      ? `\n\n[This skill's folder is ${posix.join(workspaceDir, posix.dirname(skill.source))}: files it names are relative to it.]`
      : "";
  return { ok: true, text: `${skill.content.trim()}${footer}` };
};
