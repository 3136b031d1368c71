import { PayloadTooLargeError } from "@tern/core";
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
import type { ApiDeps } from "../../../deps.ts";
import { errorResponse } from "../../../middleware/errors.ts";
import type { AgentServerEnv, AgentServerRoutes } from "../context.ts";
import { newAgentServerRouter } from "../context.ts";
import { multipartField } from "./multipart.ts";

/**
 * `/api/bash`, `/api/file` and `/api/git` of the agent server, with the paths, bodies
 * and status codes of openhands-agent-server's bash_router, file_router and git_router, as the
 * SDK's RemoteWorkspace calls them. What needs the sandbox is done by a worker (@tern/services'
 * agent-sandbox-ops.ts); bash events live in Postgres. Errors carry FastAPI's `detail`.
 */

/** One entry of FastAPI's 422 body. */
interface Problem {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
}

class Unprocessable extends Error {
  constructor(readonly problems: Problem[]) {
    super("unprocessable");
  }
}

const missing = (where: "query" | "body", name: string, input: unknown = null): Problem => ({
  type: "missing",
  loc: [where, name],
  msg: "Field required",
  input,
});

const UUID_RE = /^(?:[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/** The search's query as bash_router.search_bash_events reads it. */
const searchQueryOf = (q: Record<string, string>): BashSearch => {
  const problems: Problem[] = [];
  const out: BashSearch = { limit: 100 };
  const bad = (name: string, type: string, msg: string) =>
    problems.push({ type, loc: ["query", name], msg, input: q[name] });
  if (q.kind__eq !== undefined) {
    if (q.kind__eq === "BashCommand" || q.kind__eq === "BashOutput") out.kind = q.kind__eq;
    else bad("kind__eq", "literal_error", "Input should be 'BashCommand' or 'BashOutput'");
  }
  if (q.command_id__eq !== undefined) {
    if (UUID_RE.test(q.command_id__eq)) out.commandId = q.command_id__eq;
    else bad("command_id__eq", "uuid_parsing", "Input should be a valid UUID");
  }
  for (const [name, key] of [
    ["timestamp__gte", "timestampGte"],
    ["timestamp__lt", "timestampLt"],
  ] as const) {
    const v = q[name];
    if (v === undefined) continue;
    const d = new Date(v);
    if (Number.isNaN(d.getTime())) bad(name, "datetime_from_date_parsing", "Input should be a valid datetime");
    else out[key] = d;
  }
  if (q.order__gt !== undefined) {
    if (/^-?\d+$/.test(q.order__gt)) out.orderGt = Number(q.order__gt);
    else bad("order__gt", "int_parsing", "Input should be a valid integer");
  }
  if (q.sort_order !== undefined) {
    if (q.sort_order === "TIMESTAMP" || q.sort_order === "TIMESTAMP_DESC") out.desc = q.sort_order === "TIMESTAMP_DESC";
    else bad("sort_order", "enum", "Input should be 'TIMESTAMP' or 'TIMESTAMP_DESC'");
  }
  if (q.page_id) {
    if (/^\d{1,18}$/.test(q.page_id)) out.pageId = q.page_id;
    // An unknown page id starts at the beginning, as the agent server's does.
  }
  if (q.limit !== undefined) {
    const n = Number(q.limit);
    if (!/^\d+$/.test(q.limit)) bad("limit", "int_parsing", "Input should be a valid integer");
    else if (n <= 0) bad("limit", "greater_than", "Input should be greater than 0");
    else if (n > 100) bad("limit", "less_than_equal", "Input should be less than or equal to 100");
    else out.limit = n;
  }
  if (problems.length) throw new Unprocessable(problems);
  return out;
};

/** ExecuteBashRequest: `command` (required), `cwd` (null), `timeout` (300 s). */
const executeRequestOf = async (c: Context): Promise<ExecuteBashRequest> => {
  const body = (await c.req.json().catch(() => undefined)) as Record<string, unknown> | undefined;
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new Unprocessable([
      {
        type: "model_attributes_type",
        loc: ["body"],
        msg: "Input should be a valid dictionary or object to extract fields from",
        input: body ?? null,
      },
    ]);
  }
  const problems: Problem[] = [];
  const { command, cwd = null, timeout = 300 } = body;
  if (command === undefined) problems.push(missing("body", "command", body));
  else if (typeof command !== "string") {
    problems.push({
      type: "string_type",
      loc: ["body", "command"],
      msg: "Input should be a valid string",
      input: command,
    });
  }
  if (cwd !== null && typeof cwd !== "string") {
    problems.push({ type: "string_type", loc: ["body", "cwd"], msg: "Input should be a valid string", input: cwd });
  }
  if (typeof timeout !== "number" || !Number.isInteger(timeout)) {
    problems.push({
      type: "int_type",
      loc: ["body", "timeout"],
      msg: "Input should be a valid integer",
      input: timeout,
    });
  }
  if (problems.length) throw new Unprocessable(problems);
  const seconds = Math.min(Math.max(timeout as number, 1), 24 * 3600);
  return { command: command as string, cwd: cwd as string | null, timeout: seconds };
};

const requiredQuery = (c: Context, name: string): string => {
  const v = c.req.query(name);
  if (v === undefined) throw new Unprocessable([missing("query", name)]);
  return v;
};

/** The sandbox the mount resolved (and its caller owns). */
const sandboxOf = (c: Context<AgentServerEnv>) => c.get("agentSandbox").sandboxId;

export const agentSandboxOpsRoutes: AgentServerRoutes = (deps: ApiDeps) => {
  const app = newAgentServerRouter();
  const maxUpload = deps.config.AGENT_FILE_UPLOAD_MAX_BYTES ?? 100 * 1024 * 1024;

  // ---- /api/bash
  app.get("/api/bash/bash_events/search", async (c) => {
    const q = searchQueryOf(c.req.query());
    return c.json(await searchAgentBashEvents(deps, sandboxOf(c), q), 200);
  });

  app.get("/api/bash/bash_events/", async (c) => {
    const ids = c.req.queries("event_ids") ?? [];
    const events = await Promise.all(ids.map((id) => getAgentBashEvent(deps, sandboxOf(c), id)));
    return c.json(events, 200);
  });

  app.get("/api/bash/bash_events/:event_id", async (c) => {
    const event = await getAgentBashEvent(deps, sandboxOf(c), c.req.param("event_id"));
    if (!event) return c.json({ detail: "Not Found" }, 404);
    return c.json(event, 200);
  });

  app.delete("/api/bash/bash_events", async (c) =>
    c.json({ cleared_count: await clearAgentBashEvents(deps, sandboxOf(c)) }, 200),
  );

  app.post("/api/bash/start_bash_command", async (c) => {
    const request = await executeRequestOf(c);
    const { command } = await startAgentBashCommand(deps, sandboxOf(c), request);
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
    const request = await executeRequestOf(c);
    const started = await startAgentBashCommand(deps, sandboxOf(c), request, { wait: true });
    // The worker says what it stored last; read back only when it could not (a worker that died).
    const last = started.last ?? (await lastAgentBashOutput(deps, sandboxOf(c), started.command.id));
    return c.json(last, 200);
  });

  // ---- /api/file
  app.post("/api/file/upload", async (c) => {
    const path = requiredQuery(c, "path");
    const length = Number(c.req.header("content-length") ?? "0");
    // Multipart framing adds a little: a body far past the cap is refused before it is read.
    if (length > maxUpload + 64 * 1024) throw new PayloadTooLargeError(`The file is larger than ${maxUpload} bytes`);
    const body = c.req.raw.body;
    if (!body) throw new Unprocessable([missing("body", "file")]);
    const file = await multipartField(body, c.req.header("content-type"), "file", maxUpload);
    await uploadAgentFile(deps, sandboxOf(c), path, file, maxUpload);
    return c.json({ success: true }, 200);
  });

  app.get("/api/file/download", async (c) => {
    const res = await downloadAgentFile(deps, sandboxOf(c), requiredQuery(c, "path"));
    return new Response(res.body, {
      status: 200,
      headers: {
        "content-type": "application/octet-stream",
        "content-disposition": res.headers.get("content-disposition") ?? "attachment",
      },
    });
  });

  // ---- /api/git
  app.get("/api/git/changes", async (c) =>
    c.json(await agentGitChanges(deps, sandboxOf(c), requiredQuery(c, "path"), c.req.query("ref")), 200),
  );

  app.get("/api/git/diff", async (c) => {
    const ref = c.req.query("ref");
    const commit = c.req.query("commit");
    if (ref !== undefined && commit !== undefined) {
      return c.json({ detail: "'ref' and 'commit' are mutually exclusive" }, 400);
    }
    // The diff a single commit introduced is not served yet.
    if (commit !== undefined) return c.json({ detail: "'commit' is not supported by this server" }, 400);
    return c.json(await agentGitDiff(deps, sandboxOf(c), requiredQuery(c, "path"), ref), 200);
  });

  app.onError((err, c) =>
    err instanceof Unprocessable ? c.json({ detail: err.problems }, 422) : errorResponse(err, c, deps.logger),
  );
  return app;
};
