import { BadRequestError, gitRefSchema, NotFoundError, PayloadTooLargeError, sandboxPathSchema } from "@tern/core";
import {
  agentGitChanges,
  agentGitDiff,
  type BashSearch,
  clearAgentBashEvents,
  downloadAgentFile,
  type ExecuteBashRequest,
  getAgentBashEvent,
  lastAgentBashOutput,
  searchAgentBashEvents,
  startAgentBashCommand,
  uploadAgentFile,
} from "@tern/services";
import type { Context } from "hono";
import { z } from "zod";
import type { ApiDeps } from "../../../deps.ts";
import type { AgentServerEnv, AgentServerRoutes } from "../context.ts";
import { newAgentServerRouter } from "../context.ts";
import { jsonBody, parseRequest } from "../errors.ts";
import { multipartField } from "./multipart.ts";

/**
 * `/api/bash`, `/api/file` and `/api/git` of the agent server, with the paths, bodies
 * and status codes of openhands-agent-server's bash_router, file_router and git_router, as the
 * SDK's RemoteWorkspace calls them. What needs the sandbox is done by a worker (@tern/services'
 * agent-sandbox-ops.ts); bash events live in Postgres. Errors carry FastAPI's `detail`.
 */

const UUID_RE = /^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

const datetime = z
  .string()
  .refine((v) => !Number.isNaN(new Date(v).getTime()), "Input should be a valid datetime")
  .transform((v) => new Date(v));

/** The search's query as bash_router.search_bash_events reads it. */
const bashSearchQuery = z
  .object({
    kind__eq: z.enum(["BashCommand", "BashOutput"]).optional(),
    command_id__eq: z.string().regex(UUID_RE, "Input should be a valid UUID").optional(),
    timestamp__gte: datetime.optional(),
    timestamp__lt: datetime.optional(),
    order__gt: z.coerce.number().int().optional(),
    sort_order: z.enum(["TIMESTAMP", "TIMESTAMP_DESC"]).default("TIMESTAMP"),
    // An unknown page id starts at the beginning, as the agent server's does.
    page_id: z
      .string()
      .optional()
      .transform((v) => (v && /^\d{1,18}$/.test(v) ? v : undefined)),
    limit: z.coerce.number().int().gt(0).lte(100).default(100),
  })
  .transform(
    (q): BashSearch => ({
      limit: q.limit,
      desc: q.sort_order === "TIMESTAMP_DESC",
      ...(q.kind__eq ? { kind: q.kind__eq } : {}),
      ...(q.command_id__eq ? { commandId: q.command_id__eq } : {}),
      ...(q.timestamp__gte ? { timestampGte: q.timestamp__gte } : {}),
      ...(q.timestamp__lt ? { timestampLt: q.timestamp__lt } : {}),
      ...(q.order__gt !== undefined ? { orderGt: q.order__gt } : {}),
      ...(q.page_id ? { pageId: q.page_id } : {}),
    }),
  );

/** ExecuteBashRequest: `command` (required), `cwd` (null), `timeout` (300 s, kept within 1 s to 24 h). */
const executeRequest = z
  .object({
    command: z.string(),
    cwd: z.string().nullable().default(null),
    timeout: z.number().int().default(300),
  })
  .transform((r): ExecuteBashRequest => ({ ...r, timeout: Math.min(Math.max(r.timeout, 1), 24 * 3600) }));

/** `?path=` (required), and the git routes' `?ref=`. */
const pathQuery = z.object({ path: sandboxPathSchema });
const gitQuery = z.object({ path: sandboxPathSchema, ref: gitRefSchema.optional() });
const diffQuery = gitQuery.extend({ commit: z.string().optional() });

/** `?event_ids=` of the batch read: at most 100, as every batch read. */
const batchQuery = z.object({ event_ids: z.array(z.string()).max(100).default([]) });

/** The sandbox the mount resolved (and its caller owns). */
const sandboxOf = (c: Context<AgentServerEnv>) => c.get("agentSandbox").sandboxId;

export const agentSandboxOpsRoutes: AgentServerRoutes = (deps: ApiDeps) => {
  const app = newAgentServerRouter();
  const maxUpload = deps.config.AGENT_FILE_UPLOAD_MAX_BYTES ?? 100 * 1024 * 1024;
  const maxInFlight = deps.config.AGENT_BASH_MAX_IN_FLIGHT;

  // ---- /api/bash
  app.get("/api/bash/bash_events/search", async (c) => {
    const q = parseRequest(bashSearchQuery, c.req.query(), "query");
    return c.json(await searchAgentBashEvents(deps, sandboxOf(c), q), 200);
  });

  app.get("/api/bash/bash_events/", async (c) => {
    const { event_ids: ids } = parseRequest(batchQuery, { event_ids: c.req.queries("event_ids") }, "query");
    const events = await Promise.all(ids.map((id) => getAgentBashEvent(deps, sandboxOf(c), id)));
    return c.json(events, 200);
  });

  app.get("/api/bash/bash_events/:event_id", async (c) => {
    const event = await getAgentBashEvent(deps, sandboxOf(c), c.req.param("event_id"));
    if (!event) throw new NotFoundError("Not Found");
    return c.json(event, 200);
  });

  app.delete("/api/bash/bash_events", async (c) =>
    c.json({ cleared_count: await clearAgentBashEvents(deps, sandboxOf(c)) }, 200),
  );

  app.post("/api/bash/start_bash_command", async (c) => {
    const request = parseRequest(executeRequest, await jsonBody(c), "body");
    const { command } = await startAgentBashCommand(deps, sandboxOf(c), request, { maxInFlight });
    return c.json(
      {
        kind: "BashCommand",
        id: command.id.replaceAll("-", ""),
        timestamp: command.timestamp.toISOString(),
        command: command.command,
        cwd: command.cwd,
        timeout: command.timeout,
      },
      200,
    );
  });

  app.post("/api/bash/execute_bash_command", async (c) => {
    const request = parseRequest(executeRequest, await jsonBody(c), "body");
    const started = await startAgentBashCommand(deps, sandboxOf(c), request, {
      wait: true,
      maxWaitMs: deps.config.AGENT_BASH_EXECUTE_MAX_S * 1000,
      maxInFlight,
    });
    // The worker says what it stored last (or, past AGENT_BASH_EXECUTE_MAX_S, what ran so far);
    // read back only when it could not (a worker that died).
    const last = started.last ?? (await lastAgentBashOutput(deps, sandboxOf(c), started.command.id));
    return c.json(last, 200);
  });

  // ---- /api/file
  app.post("/api/file/upload", async (c) => {
    const { path } = parseRequest(pathQuery, c.req.query(), "query");
    const length = Number(c.req.header("content-length") ?? "0");
    // Multipart framing adds a little: a body far past the cap is refused before it is read.
    if (length > maxUpload + 64 * 1024) throw new PayloadTooLargeError(`The file is larger than ${maxUpload} bytes`);
    const body = c.req.raw.body;
    if (!body) throw new BadRequestError("Expected a multipart/form-data body");
    const file = await multipartField(body, c.req.header("content-type"), "file", maxUpload);
    await uploadAgentFile(deps, sandboxOf(c), path, file, maxUpload);
    return c.json({ success: true }, 200);
  });

  app.get("/api/file/download", async (c) => {
    const { path } = parseRequest(pathQuery, c.req.query(), "query");
    const res = await downloadAgentFile(deps, sandboxOf(c), path);
    return new Response(res.body, {
      status: 200,
      headers: {
        "content-type": "application/octet-stream",
        "content-disposition": res.headers.get("content-disposition") ?? "attachment",
      },
    });
  });

  // ---- /api/git
  app.get("/api/git/changes", async (c) => {
    const { path, ref } = parseRequest(gitQuery, c.req.query(), "query");
    return c.json(await agentGitChanges(deps, sandboxOf(c), path, ref), 200);
  });

  app.get("/api/git/diff", async (c) => {
    const { path, ref, commit } = parseRequest(diffQuery, c.req.query(), "query");
    if (ref !== undefined && commit !== undefined) {
      throw new BadRequestError("'ref' and 'commit' are mutually exclusive");
    }
    // The diff a single commit introduced is not served.
    if (commit !== undefined) throw new BadRequestError("'commit' is not supported by this server");
    return c.json(await agentGitDiff(deps, sandboxOf(c), path, ref), 200);
  });

  return app;
};
