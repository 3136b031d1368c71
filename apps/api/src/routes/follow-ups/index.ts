import { OpenAPIHono } from "@hono/zod-openapi";
import type { ApiDeps } from "../../deps.ts";

/**
 * Follow-ups on a running conversation (OpenHands shapes): POST /api/v1/conversation/{id}/events,
 * POST /api/v1/conversation/{id}/pause and /run, DELETE /api/v1/app-conversations/{id}.
 */
export const followUpRoutes = (_deps: ApiDeps) => new OpenAPIHono();
