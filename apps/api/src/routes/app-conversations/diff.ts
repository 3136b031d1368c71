import { createRoute, z } from "@hono/zod-openapi";
import { diffFormats, toHexId, workspaceDiffSchema } from "@tern/core";
import { workspaceArchive, workspaceDiff } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const sandboxErrors = {
  409: errorResponse("The sandbox is paused (resume it first) or still starting"),
  410: errorResponse("The sandbox was removed"),
  503: errorResponse("No worker is reachable to read the sandbox"),
} as const;

const diffRoute = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/diff",
  tags: ["Conversations"],
  summary: "The workspace's changes since the conversation started (git diff)",
  description:
    "`git diff` of the workspace, untracked files included (ignored ones not), against the commit the " +
    "repository was cloned at (the empty tree for a workspace that started empty). `format=text` (default) " +
    "streams the unified diff; `format=json` gives one entry per file (at most 16 MiB of diff, else 413).",
  request: {
    params: conversationIdParam,
    query: z.object({ format: z.enum(diffFormats).default("text") }),
  },
  responses: {
    200: {
      description: "The diff",
      content: {
        "text/x-diff": { schema: z.string() },
        "application/json": {
          schema: workspaceDiffSchema,
        },
      },
    },
    ...errorResponses,
    ...notFoundResponse,
    413: errorResponse("The JSON diff is larger than 16 MiB (ask for format=text)"),
    ...sandboxErrors,
  },
});

const archiveRoute = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/workspace.tar.gz",
  tags: ["Conversations"],
  summary: "The workspace as a .tar.gz archive, streamed",
  description: "The conversation's workspace directory as the sandbox holds it, compressed as it is read.",
  request: { params: conversationIdParam },
  responses: {
    200: {
      description: "A gzip-compressed tar",
      content: { "application/gzip": { schema: z.string().openapi({ type: "string", format: "binary" }) } },
    },
    ...errorResponses,
    ...notFoundResponse,
    ...sandboxErrors,
  },
});

/** Passes a worker's answer on, its body streamed as it comes. */
const passOn = (res: Response, headers: Record<string, string>) =>
  new Response(res.body, { status: 200, headers: { "cache-control": "no-store", ...headers } });

export const registerWorkspaceResults = (router: Router, deps: ApiDeps) => {
  router.openapi(diffRoute, async (c) => {
    const { format } = c.req.valid("query");
    const res = await workspaceDiff(deps, c.get("principal"), c.req.valid("param").conversation_id, format);
    return passOn(res, {
      "content-type": format === "json" ? "application/json" : "text/x-diff; charset=utf-8",
    }) as never;
  });
  router.openapi(archiveRoute, async (c) => {
    const id = c.req.valid("param").conversation_id;
    const res = await workspaceArchive(deps, c.get("principal"), id);
    return passOn(res, {
      "content-type": "application/gzip",
      "content-disposition": `attachment; filename="workspace-${toHexId(id.replaceAll("-", ""))}.tar.gz"`,
    }) as never;
  });
};
