import { z } from "zod";
import { defineTool, speechTraits, textContent } from "./tool.ts";

/** `think`: OpenHands' ThinkTool. Changes nothing; the thought stays in the history. */
export const thinkTool = defineTool({
  name: "think",
  description: "Think about something without changing anything, e.g. to plan or to weigh options.",
  args: z.object({
    thought: z.string().describe("Your reasoning, kept in the history; changes nothing."),
  }),
  traits: speechTraits("ThinkAction"),
  agentServer: { names: ["ThinkTool", "think"], default: true },
  run: async () => {
    const text = "Your thought has been logged.";
    return { text, isError: false, observation: { kind: "ThinkObservation", content: textContent(text) } };
  },
});
