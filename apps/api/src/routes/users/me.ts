import { createRoute } from "@hono/zod-openapi";
import { userRecordSchema } from "@tern/core";
import { getSettings, getUser } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toUserRecord } from "./record.ts";

const route = createRoute({
  method: "get",
  path: "/api/v1/users/me",
  tags: ["Users"],
  summary: "The caller's user record (OpenHands' UserInfo), with its settings",
  responses: {
    200: { description: "The caller", content: { "application/json": { schema: userRecordSchema } } },
    ...errorResponses,
  },
});

export const registerGetMe = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const userId = c.get("principal").userId;
    const [user, settings] = await Promise.all([getUser(deps, userId), getSettings(deps, userId)]);
    return c.json(toUserRecord(user, settings), 200);
  });
