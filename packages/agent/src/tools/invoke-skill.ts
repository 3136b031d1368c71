import { z } from "zod";

/** `invoke_skill` (OpenHands' built-in tool): reads one of the repository's listed skills in full. */
export const invokeSkillArgs = z.object({
  name: z.string().min(1).max(200).describe("The skill's name, as listed in <available_skills>."),
});

export const invokeSkillDescription =
  "Read one of the repository's skills in full, by the name listed in <available_skills>. Returns its " +
  "instructions; for a skill folder, also where its files (scripts, references) are.";
