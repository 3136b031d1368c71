import { z } from "zod";

/** OpenHands' SkillResponse: a skill the repository brought. */
export const skillRecordSchema = z
  .object({
    name: z.string(),
    type: z
      .enum(["repo", "knowledge", "agentskills"])
      .meta({ description: "`repo`: always in the system prompt; `knowledge`: loaded when a trigger is said" }),
    content: z.string(),
    triggers: z.array(z.string()),
  })
  .meta({ id: "SkillResponse" });

export const skillsResponseSchema = z.object({ skills: z.array(skillRecordSchema) }).meta({ id: "GetSkillsResponse" });

const hookDefinitionSchema = z
  .object({
    type: z.literal("command"),
    command: z.string(),
    timeout: z.number().int().nullable().meta({ description: "Seconds; null: none" }),
    async: z.boolean(),
  })
  .meta({ id: "HookDefinition" });

/** OpenHands' hooks shape: per event, per matcher, the commands run. */
export const hookRecordSchema = z
  .object({
    event_type: z.string().meta({ description: "`pre-commit`: git's hook, from .openhands/pre-commit.sh" }),
    matchers: z.array(
      z.object({ matcher: z.string(), hooks: z.array(hookDefinitionSchema) }).meta({ id: "HookMatcher" }),
    ),
  })
  .meta({ id: "HookConfig" });

export const hooksResponseSchema = z.object({ hooks: z.array(hookRecordSchema) }).meta({ id: "GetHooksResponse" });
