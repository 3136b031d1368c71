import { OpenAPIHono } from "@hono/zod-openapi";
import type { AuthEnv } from "../middleware/auth.ts";
import { validationHook } from "../middleware/validation.ts";

/** Every resource router: typed with the authenticated principal, validation failures as 422. */
export const newRouter = () => new OpenAPIHono<AuthEnv>({ defaultHook: validationHook });

export type Router = ReturnType<typeof newRouter>;
