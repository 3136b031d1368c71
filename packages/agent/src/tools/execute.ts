import { type ToolArgs, type ToolName, toolNamed } from "./registry.ts";
import type { ToolContext, ToolOutcome } from "./tool.ts";

export type { ToolContext, ToolOutcome } from "./tool.ts";

/** Runs one validated call of a built-in tool (tools/registry.ts). */
export const executeTool = <N extends ToolName>(name: N, args: ToolArgs<N>, ctx: ToolContext): Promise<ToolOutcome> =>
  toolNamed(name).run(args, ctx);
