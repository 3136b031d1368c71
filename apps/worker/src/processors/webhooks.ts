import {
  checkedFetch,
  OutboundAddressError,
  type OutboundAddressPolicy,
  parseOutboundUrl,
  startPeriodicTask,
  toHexId,
} from "@tern/core";
import { type AttemptOutcome, type WebhookDelivery, webhookSecretContext, webhooksRepository } from "@tern/db";
import { enqueue, type JobPayload } from "@tern/queue";
import type { Job } from "bullmq";
import { Webhook } from "standardwebhooks";
import type { WorkerDeps } from "../deps.ts";

/** Deliveries the sweep enqueues at once, at most. */
const SWEEP_BATCH = 200;
/** What is kept of a receiver's answer: its status says it all; the body only for the error text. */
const MAX_RESPONSE_BYTES = 4096;

export type DeliverOutcome = "delivered" | "retry" | "failed" | "skipped";

/** The webhook-id of a delivery: the same on every try, so a receiver can drop repeats. */
const webhookMessageId = (deliveryId: string): string => `msg_${toHexId(deliveryId)}`;

const policyOf = (deps: WorkerDeps): OutboundAddressPolicy => ({
  allowPrivate: deps.config.WEBHOOK_ALLOW_PRIVATE,
  allowHttp: deps.config.WEBHOOK_ALLOW_HTTP,
});

/**
 * When to try again after the `attempt`-th try failed: exponential (base × 2^(attempt-1), with
 * up to 10 % jitter so a receiver that was down is not hit by every delivery at once), capped;
 * null once that would be past the retry window after the state change.
 */
export const nextTryAt = (
  config: Pick<
    WorkerDeps["config"],
    "WEBHOOK_RETRY_BASE_MS" | "WEBHOOK_RETRY_MAX_DELAY_MS" | "WEBHOOK_RETRY_WINDOW_MS"
  >,
  createdAt: string,
  attempt: number,
  now: number = Date.now(),
): Date | null => {
  const exp = config.WEBHOOK_RETRY_BASE_MS * 2 ** Math.min(attempt - 1, 40);
  const delay = Math.min(exp, config.WEBHOOK_RETRY_MAX_DELAY_MS) * (1 + Math.random() * 0.1);
  const at = now + delay;
  return at > Date.parse(createdAt) + config.WEBHOOK_RETRY_WINDOW_MS ? null : new Date(at);
};

/**
 * POSTs `body` to `url` through the checked client (core's outbound-fetch.ts): the name resolved,
 * every address checked against the policy, the connection pinned to a checked one, no redirects.
 * The whole try is bounded, not only idle time (a receiver trickling bytes cannot hold a worker),
 * and only the first MAX_RESPONSE_BYTES of the answer are read.
 */
const post = async (
  url: URL,
  policy: OutboundAddressPolicy,
  headers: Record<string, string>,
  body: string,
  timeoutMs: number,
): Promise<{ status: number; text: string }> => {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  try {
    const res = await checkedFetch({ policy, settings: "WEBHOOK" })(url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body,
      signal: deadline.signal,
    });
    return { status: res.status, text: await leadingText(res, MAX_RESPONSE_BYTES) };
  } catch (err) {
    throw deadline.signal.aborted ? deadline.signal.reason : err;
  } finally {
    clearTimeout(timer);
  }
};

/** The first `max` bytes of an answer's body as text; the rest is not read. */
const leadingText = async (res: Response, max: number): Promise<string> => {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < max) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.length;
  }
  await reader.cancel().catch(() => undefined);
  return Buffer.concat(chunks)
    .subarray(0, max)
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
};

/** The Standard Webhooks message of a delivery: `{type, timestamp, data}`. */
const messageOf = (d: WebhookDelivery): string =>
  JSON.stringify({ type: d.eventType, timestamp: d.createdAt, data: d.data });

/**
 * One try of a delivery. Idempotent: the claim lets one worker at a time try a due delivery,
 * and the try is recorded only as the next one; a job for a try already made does nothing.
 */
const deliverWebhook = async (deps: WorkerDeps, deliveryId: string): Promise<DeliverOutcome> => {
  const { config, logger } = deps;
  const repo = webhooksRepository(deps.db);
  // Held for twice the longest a try may take: past that its worker is gone, and the sweep frees it.
  const delivery = await repo.claim(deliveryId, config.WEBHOOK_TIMEOUT_MS * 2);
  if (!delivery) return "skipped";
  const attempt = delivery.attempts + 1;
  const startedAt = new Date();
  const log = logger.child({ delivery_id: deliveryId, webhook_id: delivery.webhookId, attempt });

  const webhook = await repo.get(delivery.webhookId);
  let outcome: AttemptOutcome;
  if (!webhook) {
    outcome = { delivered: false, statusCode: null, error: "the webhook was deleted", retryAt: null };
  } else {
    try {
      const policy = policyOf(deps);
      const url = parseOutboundUrl(webhook.url, policy, "WEBHOOK");
      const secret = deps.secretBox.open(webhook.secretSealed, webhookSecretContext(webhook.id));
      const body = messageOf(delivery);
      const msgId = webhookMessageId(delivery.id);
      const signature = new Webhook(secret).sign(msgId, startedAt, body);
      const res = await post(
        url,
        policy,
        {
          "webhook-id": msgId,
          "webhook-timestamp": String(Math.floor(startedAt.getTime() / 1000)),
          "webhook-signature": signature,
          "user-agent": "tern-webhooks/1",
        },
        body,
        config.WEBHOOK_TIMEOUT_MS,
      );
      outcome =
        res.status >= 200 && res.status < 300
          ? { delivered: true, statusCode: res.status }
          : {
              delivered: false,
              statusCode: res.status,
              error: `HTTP ${res.status}${res.text ? `: ${res.text}` : ""}`,
              retryAt: nextTryAt(config, delivery.createdAt, attempt),
            };
    } catch (err) {
      const message = err instanceof OutboundAddressError ? `refused address: ${err.message}` : String(err);
      outcome = {
        delivered: false,
        statusCode: null,
        error: message,
        retryAt: nextTryAt(config, delivery.createdAt, attempt),
      };
    }
  }
  const durationMs = Date.now() - startedAt.getTime();
  if (!(await repo.recordAttempt(delivery.id, attempt, startedAt, durationMs, outcome))) return "skipped";
  if (outcome.delivered) {
    log.debug({ status: outcome.statusCode, duration_ms: durationMs }, "webhook delivered");
    return "delivered";
  }
  if (!outcome.retryAt) {
    log.warn({ status: outcome.statusCode, error: outcome.error }, "webhook delivery failed for good");
    return "failed";
  }
  log.info(
    { status: outcome.statusCode, error: outcome.error, retry_at: outcome.retryAt },
    "webhook delivery failed; retrying",
  );
  // On time for the next try; the sweep would find it too (a few interval later at worst).
  await enqueue(
    deps.queues,
    "webhook.deliver",
    { deliveryId, attempt },
    { delay: Math.max(0, outcome.retryAt.getTime() - Date.now()) },
  ).catch((err: unknown) => log.warn({ err }, "could not enqueue the next try; the sweep will"));
  return "retry";
};

export const webhookDeliverProcessor =
  (deps: WorkerDeps) =>
  async (job: Job<JobPayload<"webhook.deliver">>): Promise<DeliverOutcome> =>
    deliverWebhook(deps, job.data.deliveryId);

/**
 * Enqueues a try of every due delivery of the outbox. This is what makes the outbox safe: a row
 * committed by a process that died before anything was enqueued, a job lost with Redis, a try
 * whose worker died holding it (once its claim lapsed): all are found here. The job id is per try,
 * so a delivery already waiting in the queue is not added twice.
 */
const sweepWebhookOutbox = async (deps: WorkerDeps): Promise<number> => {
  const due = await webhooksRepository(deps.db).listDue(SWEEP_BATCH);
  for (const d of due) {
    await enqueue(deps.queues, "webhook.deliver", { deliveryId: d.id, attempt: d.attempts });
  }
  return due.length;
};

/** Sweeps every WEBHOOK_SWEEP_INTERVAL_MS until stopped (each worker process runs one). */
export const startWebhookOutboxSweep = (deps: WorkerDeps): { stop: () => Promise<void> } =>
  startPeriodicTask("webhook outbox sweep", () => sweepWebhookOutbox(deps), {
    everyMs: deps.config.WEBHOOK_SWEEP_INTERVAL_MS,
    logger: deps.logger,
  });
