import { createRoute, z } from "@hono/zod-openapi";
import { DEFAULT_FILE_PATH, readWorkspaceFile } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { conversationIdParam } from "../follow-ups/conversation.ts";
import { errorResponse, errorResponses, notFoundResponse } from "../records.ts";
import type { Router } from "../router.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/app-conversations/{conversation_id}/file",
  tags: ["Conversations"],
  summary: "A file's text from the conversation's sandbox",
  description:
    "`file_path` is absolute, or relative to the conversation's workspace directory; it must stay in the " +
    "sandbox's workspace (/workspace) once every symlink is resolved, as the sandbox resolves them. As " +
    "OpenHands answers, a path that names no regular file reads as an empty string. A worker reads it: the " +
    "API never talks to the sandbox engine.",
  request: {
    params: conversationIdParam,
    query: z.object({
      file_path: z
        .string()
        .min(1)
        .max(4096)
        .refine((p) => !p.includes("\0"), "must not contain NUL")
        .default(DEFAULT_FILE_PATH)
        .openapi({ description: "Absolute, or relative to the workspace directory", example: "README.md" }),
    }),
  },
  responses: {
    200: { description: "The file's text (JSON string)", content: { "application/json": { schema: z.string() } } },
    ...errorResponses,
    403: errorResponse("The path leads outside the workspace (also through a symlink), or is unreadable"),
    ...notFoundResponse,
    409: errorResponse("The sandbox is paused (resume it first) or still starting"),
    410: errorResponse("The sandbox was removed"),
    413: errorResponse("The file is larger than 8 MiB"),
    503: errorResponse("No worker is reachable to read the sandbox"),
  },
});

export const registerReadFile = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const { conversation_id } = c.req.valid("param");
    return c.json(
      await readWorkspaceFile(deps, c.get("principal"), conversation_id, c.req.valid("query").file_path),
      200,
    );
  });
