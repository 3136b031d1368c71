import type { Skill } from "./domain.ts";

/**
 * Which of a conversation's skills a user message triggers: shared by the worker (the initial
 * message), the services (follow-ups) and the agent (the history it sends), so all three agree.
 */

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** `keyword` as a whole word of `text`, ignoring case: `git` is not in `github`, `/deploy` is in "run /deploy". */
export const saysKeyword = (text: string, keyword: string): boolean => {
  const k = keyword.trim().toLowerCase();
  if (!k) return false;
  return new RegExp(`(?<![a-z0-9])${escapeRegExp(k)}(?![a-z0-9])`).test(text.toLowerCase());
};

export interface SkillMatch {
  skill: Skill;
  /** The keyword or path pattern that matched. */
  trigger: string;
}

/** Skills with a trigger that `message` says (path rules never: they answer to files), each with the first one it says. */
export const skillsTriggeredBy = (skills: Skill[], message: string): SkillMatch[] =>
  skills.flatMap((skill) => {
    if ((skill.paths?.length ?? 0) > 0) return [];
    const trigger = skill.triggers.find((t) => saysKeyword(message, t));
    return trigger ? [{ skill, trigger }] : [];
  });
