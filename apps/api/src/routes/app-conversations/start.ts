import { createRoute } from "@hono/zod-openapi";
import { AppError, type StartRequest, type StartTask } from "@tern/core";
import { startTasksRepository } from "@tern/db";
import { startJobOptions } from "@tern/queue";
import type { ApiDeps } from "../../deps.ts";
import { errorResponses, errorSchema, startTaskRecordSchema, toStartTaskRecord } from "../records.ts";
import type { Router } from "../router.ts";
import { startConversationBody } from "./start-request.ts";

const route = createRoute({
  method: "post",
  path: "/api/v1/app-conversations",
  tags: ["Conversations"],
  summary: "Start a conversation; follow the returned start task until READY",
  request: { body: { required: true, content: { "application/json": { schema: startConversationBody } } } },
  responses: {
    200: { description: "The start task, WORKING", content: { "application/json": { schema: startTaskRecordSchema } } },
    ...errorResponses,
    503: {
      description: "The job queue is unreachable; nothing was written",
      content: { "application/json": { schema: errorSchema } },
    },
  },
});

const ENQUEUE_TIMEOUT_MS = 5_000;

export const registerStartConversation = (router: Router, deps: ApiDeps) =>
  router.openapi(route, async (c) => {
    const request = c.req.valid("json") as StartRequest;
    const userId = c.get("principal").userId;
    // Fail fast while the connection is down, rather than holding a transaction open for the timeout.
    if (deps.redis.status !== "ready") {
      throw new AppError("service_unavailable", "The job queue is unreachable; try again shortly");
    }
    // The task row and its job stand or fall together: the job is added inside the transaction,
    // so a Redis failure rolls the row back (503), and a commit that fails after the add leaves a
    // job whose task does not exist, which the worker drops. A task never sits in WORKING unqueued.
    const task = await deps.db.transaction().execute(async (trx): Promise<StartTask> => {
      const created = await startTasksRepository(trx).create(userId, request);
      try {
        await withTimeout(
          deps.queues.start.add("start", { taskId: created.id }, { ...startJobOptions, jobId: created.id }),
          ENQUEUE_TIMEOUT_MS,
        );
      } catch (err) {
        deps.logger.warn({ err, task_id: created.id }, "could not enqueue the start job");
        throw new AppError("service_unavailable", "The job queue is unreachable; try again shortly");
      }
      return created;
    });
    return c.json(toStartTaskRecord(task), 200);
  });

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
};
