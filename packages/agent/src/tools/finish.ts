import { z } from "zod";
import { defineTool, speechTraits, textContent } from "./tool.ts";

/** `finish`: OpenHands' FinishTool. Its message is the agent's last word of the run. */
export const finishTool = defineTool({
  name: "finish",
  description: "Call when the task is done, with a short summary for the user.",
  args: z.object({
    message: z.string().describe("A short summary of what was done, for the user."),
  }),
  traits: speechTraits("FinishAction"),
  agentServer: { names: ["FinishTool", "finish"], default: true },
  run: async ({ message }) => ({
    text: message,
    isError: false,
    observation: { kind: "FinishObservation", content: textContent(message) },
  }),
});
