import { createRoute } from "@hono/zod-openapi";
import { createdUserSchema, createUserRequestSchema, ForbiddenError, toHexId } from "@tern/core";
import { createUserWithKey, getSettings, getUser } from "@tern/services";
import type { ApiDeps } from "../../deps.ts";
import { errorResponse, errorResponses } from "../records.ts";
import type { Router } from "../router.ts";
import { toUserRecord } from "./record.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/users",
  tags: ["Users"],
  summary:
    "Create a user (admin keys only) with a first key, shown once; the user makes more with POST /api/keys (or `cli keys create --user`)",
  request: { body: { required: false, content: { "application/json": { schema: createUserRequestSchema } } } },
  responses: {
    201: { description: "The new user", content: { "application/json": { schema: createdUserSchema } } },
    ...errorResponses,
    403: errorResponse("The caller's key is not an admin key"),
  },
});

export const registerCreateUser = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    if (!c.get("principal").isAdmin) throw new ForbiddenError("Only admin keys may create users");
    const input = c.req.valid("json") ?? { is_admin: false };
    const created = await createUserWithKey(
      { db: deps.db, maxKeyLifetimeDays: deps.config.API_KEY_MAX_LIFETIME_DAYS },
      { admin: input.is_admin, userName: input.name ?? null, name: "first key" },
    );
    const [user, settings] = await Promise.all([getUser(deps, created.userId), getSettings(deps, created.userId)]);
    return c.json({ ...toUserRecord(user, settings), key: created.key, key_id: toHexId(created.apiKey.id) }, 201);
  });
