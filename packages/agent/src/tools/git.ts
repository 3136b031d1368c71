import type { Conversation, Observation } from "@tern/core";
import type { SandboxRef } from "@tern/sandbox";
import { z } from "zod";
import { defineTool } from "./tool.ts";

/**
 * The agent's git tools: run by the worker, not in the sandbox, because they need the
 * user's provider token, which never enters a sandbox. The worker takes the commits out of the
 * sandbox and pushes them, and opens the pull request through the provider's API.
 */
export const gitPushArgs = z.object({
  branch: z
    .string()
    .min(1)
    .max(200)
    .describe("The local branch of the workspace repository to push; the remote branch gets the same name."),
});

export const createPullRequestArgs = z.object({
  title: z.string().min(1).max(256).describe("Title of the pull request."),
  body: z.string().max(65_536).default("").describe("Description of the pull request (Markdown)."),
  base: z.string().min(1).max(200).describe("The branch to merge into, e.g. main."),
  head: z.string().min(1).max(200).describe("The branch with the changes; push it with git_push first."),
});

const gitToolDescriptions = {
  git_push:
    "Push a branch of the workspace repository to its git provider, with the user's credentials (the sandbox has " +
    "none: never try to push from the terminal). Commit your changes on that branch first. Never forces.",
  create_pull_request:
    "Open a pull request (GitLab: merge request) from `head` into `base` of the workspace repository, with the " +
    "user's credentials. Push `head` with git_push first. Returns the pull request's URL.",
} as const;

export interface GitToolRequest {
  conversation: Conversation;
  /** The conversation's sandbox: where the commits are taken from. */
  sandboxRef: SandboxRef;
}

export interface GitToolResult {
  text: string;
  isError: boolean;
  /** The pull request's address and number, when one was opened (or found open already). */
  url?: string;
  number?: number;
}

/** What the worker gives the agent loop to run the git tools with. */
export interface GitToolRunner {
  push(req: GitToolRequest, args: z.infer<typeof gitPushArgs>): Promise<GitToolResult>;
  createPullRequest(req: GitToolRequest, args: z.infer<typeof createPullRequestArgs>): Promise<GitToolResult>;
}

export const gitObservation = (
  kind: "GitPushObservation" | "PullRequestObservation",
  r: GitToolResult,
): Observation => ({
  kind,
  content: [{ type: "text" as const, text: r.text }],
  is_error: r.isError,
  ...(r.url ? { url: r.url } : {}),
  ...(r.number !== undefined ? { pr_number: r.number } : {}),
});

const gitTraits = {
  instant: false,
  slow: true,
  recorded: false,
  readsStoredEvents: false,
} as const;

const notAvailable = (name: string): GitToolResult => ({ text: `${name} is not available here.`, isError: true });

/** `git_push`: the worker takes the branch's commits out of the sandbox and pushes them. */
export const gitPushTool = defineTool({
  name: "git_push",
  description: gitToolDescriptions.git_push,
  args: gitPushArgs,
  traits: { ...gitTraits, needsSandbox: true, actionKind: "GitPushAction", defaultRisk: "HIGH" },
  run: async (args, ctx) => {
    const r =
      ctx.git && ctx.conversation
        ? await ctx.git.push({ conversation: ctx.conversation, sandboxRef: ctx.sandboxRef }, args)
        : notAvailable("git_push");
    return { text: r.text, isError: r.isError, observation: gitObservation("GitPushObservation", r) };
  },
});

/** `create_pull_request`: opened through the provider's API by the worker; needs no sandbox. */
export const createPullRequestTool = defineTool({
  name: "create_pull_request",
  description: gitToolDescriptions.create_pull_request,
  args: createPullRequestArgs,
  traits: { ...gitTraits, needsSandbox: false, actionKind: "CreatePullRequestAction", defaultRisk: "MEDIUM" },
  run: async (args, ctx) => {
    const r =
      ctx.git && ctx.conversation
        ? await ctx.git.createPullRequest({ conversation: ctx.conversation, sandboxRef: ctx.sandboxRef }, args)
        : notAvailable("create_pull_request");
    return { text: r.text, isError: r.isError, observation: gitObservation("PullRequestObservation", r) };
  },
});
