import { z } from "zod";
import { invokedSkillText } from "../skills.ts";
import { defineTool, textContent } from "./tool.ts";

/** `invoke_skill` (OpenHands' built-in tool): reads one of the repository's listed skills in full. */
const invokeSkillArgs = z.object({
  name: z.string().min(1).max(200).describe("The skill's name, as listed in <available_skills>."),
});

const invokeSkillDescription =
  "Read one of the repository's skills in full, by the name listed in <available_skills>. Returns its " +
  "instructions; for a skill folder, also where its files (scripts, references) are.";

/** `invoke_skill`: reads a skill from the conversation's stored skills; needs no sandbox. */
export const invokeSkillTool = defineTool({
  name: "invoke_skill",
  description: invokeSkillDescription,
  args: invokeSkillArgs,
  traits: {
    instant: false,
    slow: false,
    recorded: true,
    needsSandbox: false,
    readsStoredEvents: false,
    actionKind: "InvokeSkillAction",
    defaultRisk: "LOW",
  },
  run: async ({ name }, ctx) => {
    const r = invokedSkillText(ctx.conversation?.skills ?? [], name, ctx.workspaceDir);
    return {
      text: r.text,
      isError: !r.ok,
      observation: { kind: "InvokeSkillObservation", skill_name: name, content: textContent(r.text), is_error: !r.ok },
    };
  },
});
