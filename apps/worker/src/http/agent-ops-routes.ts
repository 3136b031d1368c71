import { agentOpsApi, BadRequestError, type Logger } from "@tern/core";
import type { Hono } from "hono";
import {
  type AgentOpsDeps,
  downloadWorkspaceFile,
  startBashCommand,
  uploadWorkspaceFile,
  workspaceGitChanges,
  workspaceGitDiff,
} from "./agent-ops.ts";

/** An upload is refused past this whatever the API asked (`max`): the worker's own bound. */
const HARD_MAX_UPLOAD_BYTES = 1024 * 1024 * 1024;

const required = (value: string | undefined, name: string): string => {
  if (!value) throw new BadRequestError(`${name} is required`);
  return value;
};

/** The internal routes of the agent-server operations (@tern/core's agent-ops-api.ts), behind the internal token. */
export const registerAgentOps = (app: Hono, deps: AgentOpsDeps & { logger: Logger }) => {
  app.post(agentOpsApi.bash, async (c) => {
    const { done } = await startBashCommand(deps, c.req.param("sandboxId"), c.req.param("commandId"));
    if (c.req.query("wait") === "1") {
      // The last output, stored before this answer: the API answers it without reading it back.
      return c.json({ finished: true, last: await done }, 200);
    }
    done.catch((err) => deps.logger.error({ err }, "a bash command failed to run"));
    return c.json({ finished: false }, 202);
  });

  app.post(agentOpsApi.files, async (c) => {
    const max = Math.min(
      Number(c.req.query("max") ?? HARD_MAX_UPLOAD_BYTES) || HARD_MAX_UPLOAD_BYTES,
      HARD_MAX_UPLOAD_BYTES,
    );
    await uploadWorkspaceFile(
      deps,
      c.req.param("sandboxId"),
      required(c.req.query("path"), "path"),
      c.req.raw.body,
      max,
    );
    return c.json({ success: true }, 200);
  });

  app.get(agentOpsApi.files, async (c) => {
    const { name, body } = await downloadWorkspaceFile(
      deps,
      c.req.param("sandboxId"),
      required(c.req.query("path"), "path"),
    );
    return c.body(body, 200, {
      "content-type": "application/octet-stream",
      "content-disposition": `attachment; filename*=utf-8''${encodeURIComponent(name)}`,
    });
  });

  app.get(agentOpsApi.gitChanges, async (c) =>
    c.json(
      await workspaceGitChanges(
        deps,
        c.req.param("sandboxId"),
        required(c.req.query("path"), "path"),
        c.req.query("ref"),
      ),
      200,
    ),
  );

  app.get(agentOpsApi.gitDiff, async (c) =>
    c.json(
      await workspaceGitDiff(deps, c.req.param("sandboxId"), required(c.req.query("path"), "path"), c.req.query("ref")),
      200,
    ),
  );
};
