import type { z } from "zod";
import { fileEditorTool } from "./file-editor.ts";
import { finishTool } from "./finish.ts";
import { createPullRequestTool, gitPushTool } from "./git.ts";
import { invokeSkillTool } from "./invoke-skill.ts";
import { taskTrackerTool } from "./task-tracker.ts";
import { terminalTool } from "./terminal/tool.ts";
import { thinkTool } from "./think.ts";
import { mcpToolTraits, type ToolSpec, type ToolTraits } from "./tool.ts";

/**
 * Every built-in tool, in the order the model is offered them. A tool is one file (its schema,
 * description, traits and executor: tool.ts) and one line here; the loop, the API's agent-server
 * tool list and the page read this list, never a list of names of their own.
 */
export const builtInTools = [
  terminalTool,
  fileEditorTool,
  thinkTool,
  finishTool,
  gitPushTool,
  createPullRequestTool,
  taskTrackerTool,
  invokeSkillTool,
] as const;

type BuiltInTool = (typeof builtInTools)[number];
export type ToolName = BuiltInTool["name"];
export type ToolArgs<N extends ToolName> = z.infer<Extract<BuiltInTool, { name: N }>["args"]>;

const byName = new Map<string, ToolSpec>(builtInTools.map((t) => [t.name, t as unknown as ToolSpec]));

export const isToolName = (name: string): name is ToolName => byName.has(name);

/** The built-in tool of that name. */
export const toolNamed = (name: ToolName): ToolSpec => byName.get(name) as ToolSpec;

/** What the loop needs to know of a call's tool: a built-in's traits, else an MCP tool's. */
export const traitsOf = (name: string): ToolTraits => byName.get(name)?.traits ?? mcpToolTraits;

/** Each tool's argument schema, by name. */
export const toolArgs = Object.fromEntries(builtInTools.map((t) => [t.name, t.args])) as {
  [T in BuiltInTool as T["name"]]: T["args"];
};

/** A tool as the API and the page see it: its name and traits, and its agent-server names. */
export interface ToolCatalogueEntry {
  name: ToolName;
  traits: ToolTraits;
  agentServer: { names: readonly string[]; default: boolean } | null;
}

/** The registry without its executors: what the API serves and the page is given. */
export const toolCatalogue = (): ToolCatalogueEntry[] =>
  builtInTools.map((t) => ({
    name: t.name,
    traits: t.traits,
    agentServer:
      "agentServer" in t && t.agentServer
        ? { names: t.agentServer.names, default: t.agentServer.default === true }
        : null,
  }));
