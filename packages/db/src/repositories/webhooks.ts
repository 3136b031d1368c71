import { newId, type WebhookDeliveryStatus, type WebhookEventType } from "@tern/core";
import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, WebhookDeliveriesTable, WebhooksTable } from "../schema.ts";

export interface Webhook {
  id: string;
  userId: string;
  url: string;
  events: WebhookEventType[];
  /** The signing secret, sealed (open it with the secret box, context `webhookSecretContext(id)`). */
  secretSealed: string;
  createdAt: string;
}

export interface WebhookDeliveryAttempt {
  attempt: number;
  startedAt: string;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
}

export interface WebhookDelivery {
  id: string;
  webhookId: string;
  eventType: WebhookEventType;
  data: Record<string, unknown>;
  status: WebhookDeliveryStatus;
  attempts: number;
  nextAttemptAt: string;
  createdAt: string;
  deliveredAt: string | null;
}

/** The additional data a webhook's sealed secret is bound to: it opens for that webhook only. */
export const webhookSecretContext = (webhookId: string): string => `webhook:${webhookId}`;

const toWebhook = (r: Selectable<WebhooksTable>): Webhook => ({
  id: r.id,
  userId: r.user_id,
  url: r.url,
  events: r.events as WebhookEventType[],
  secretSealed: r.secret_sealed,
  createdAt: r.created_at,
});

const toDelivery = (r: Selectable<WebhookDeliveriesTable>): WebhookDelivery => ({
  id: r.id,
  webhookId: r.webhook_id,
  eventType: r.event_type as WebhookEventType,
  data: r.data,
  status: r.status as WebhookDeliveryStatus,
  attempts: r.attempts,
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  deliveredAt: r.delivered_at,
});

/**
 * The outbox write of a start task's status change (tern_task_webhooks: one pending delivery per
 * live webhook of the task's user that subscribed to `start_task.status`, of the row as it is
 * now). Call it in the transaction of the change.
 */
export const writeStartTaskStatusOutbox = async (trx: Kysely<Database>, taskId: string): Promise<void> => {
  await sql`select tern_task_webhooks(${taskId}::uuid)`.execute(trx);
};

/** How a delivery's try went, as the worker reports it. */
export type AttemptOutcome =
  | { delivered: true; statusCode: number }
  | { delivered: false; statusCode: number | null; error: string; retryAt: Date | null };

export const webhooksRepository = (db: Kysely<Database>) => ({
  /** Every sealed signing secret, for a key rotation (`cli secrets rotate-key`): `reseal` returns the new value. */
  async resealAll(reseal: (sealed: string, context: string) => string): Promise<number> {
    const rows = await db.selectFrom("webhooks").select(["id", "secret_sealed"]).execute();
    for (const r of rows) {
      const next = reseal(r.secret_sealed, webhookSecretContext(r.id));
      if (next !== r.secret_sealed) {
        await db
          .updateTable("webhooks")
          .set({ secret_sealed: next })
          .where("id", "=", r.id)
          .where("secret_sealed", "=", r.secret_sealed)
          .execute();
      }
    }
    return rows.length;
  },

  async create(input: {
    id?: string;
    userId: string;
    url: string;
    events: WebhookEventType[];
    secretSealed: string;
  }): Promise<Webhook> {
    const row = await db
      .insertInto("webhooks")
      .values({
        id: input.id ?? newId(),
        user_id: input.userId,
        url: input.url,
        events: sql<string[]>`${sql.val(input.events)}::text[]`,
        secret_sealed: input.secretSealed,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toWebhook(row);
  },

  /** A live webhook of `userId`; null for another user's, a deleted or an unknown one. */
  async getForUser(userId: string, id: string): Promise<Webhook | null> {
    const row = await db
      .selectFrom("webhooks")
      .selectAll()
      .where("id", "=", id)
      .where("user_id", "=", userId)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
    return row ? toWebhook(row) : null;
  },

  /** Any webhook, deleted or not: what a delivery needs to be sent. */
  async get(id: string): Promise<Webhook | null> {
    const row = await db.selectFrom("webhooks").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toWebhook(row) : null;
  },

  /** The user's live webhooks, newest first (webhooks_user_live_idx). */
  async listForUser(userId: string): Promise<Webhook[]> {
    const rows = await db
      .selectFrom("webhooks")
      .selectAll()
      .where("user_id", "=", userId)
      .where("deleted_at", "is", null)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute();
    return rows.map(toWebhook);
  },

  async countForUser(userId: string): Promise<number> {
    const row = await db
      .selectFrom("webhooks")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("user_id", "=", userId)
      .where("deleted_at", "is", null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  },

  /**
   * Deletes a webhook: no new deliveries, and its pending ones end `failed` (nobody wants them any
   * more). Kept for the deliveries' history. False when it is not the user's or already deleted.
   */
  async deleteForUser(userId: string, id: string): Promise<boolean> {
    const res = await db
      .with("d", (qb) =>
        qb
          .updateTable("webhooks")
          .set({ deleted_at: sql<string>`now()` })
          .where("id", "=", id)
          .where("user_id", "=", userId)
          .where("deleted_at", "is", null)
          .returning("id"),
      )
      .with("p", (qb) =>
        qb
          .updateTable("webhook_deliveries")
          .set({ status: "failed" })
          .where("webhook_id", "in", (eb) => eb.selectFrom("d").select("d.id"))
          .where("status", "=", "pending")
          .returning("webhook_deliveries.id"),
      )
      .selectFrom("d")
      .select("d.id")
      .execute();
    return res.length > 0;
  },

  /**
   * A webhook's deliveries, newest first, keyset-paged after (created_at, id) of the last one seen
   * (webhook_deliveries_webhook_idx), each with its attempts in order. Returns up to `limit` + 1.
   */
  async listDeliveries(
    webhookId: string,
    opts: { limit: number; after?: { createdAt: string; id: string } | null },
  ): Promise<(WebhookDelivery & { attemptList: WebhookDeliveryAttempt[] })[]> {
    let q = db.selectFrom("webhook_deliveries").selectAll().where("webhook_id", "=", webhookId);
    if (opts.after) {
      q = q.where(sql<boolean>`(created_at, id) < (${opts.after.createdAt}::timestamptz, ${opts.after.id}::uuid)`);
    }
    const rows = await q
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(opts.limit + 1)
      .execute();
    if (rows.length === 0) return [];
    const attempts = await db
      .selectFrom("webhook_delivery_attempts")
      .selectAll()
      .where(
        "delivery_id",
        "in",
        rows.map((r) => r.id),
      )
      .orderBy("delivery_id")
      .orderBy("attempt")
      .execute();
    const byDelivery = new Map<string, WebhookDeliveryAttempt[]>();
    for (const a of attempts) {
      const list = byDelivery.get(a.delivery_id) ?? [];
      list.push({
        attempt: a.attempt,
        startedAt: a.started_at,
        durationMs: a.duration_ms,
        statusCode: a.status_code,
        error: a.error,
      });
      byDelivery.set(a.delivery_id, list);
    }
    return rows.map((r) => ({ ...toDelivery(r), attemptList: byDelivery.get(r.id) ?? [] }));
  },

  async getDelivery(id: string): Promise<WebhookDelivery | null> {
    const row = await db.selectFrom("webhook_deliveries").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? toDelivery(row) : null;
  },

  /** Pending deliveries that are due and held by nobody, oldest first (webhook_deliveries_due_idx). */
  async listDue(limit: number): Promise<{ id: string; attempts: number }[]> {
    return db
      .selectFrom("webhook_deliveries")
      .select(["id", "attempts"])
      .where("status", "=", "pending")
      .where("next_attempt_at", "<=", sql<string>`now()`)
      .where((eb) => eb.or([eb("locked_until", "is", null), eb("locked_until", "<", sql<string>`now()`)]))
      .orderBy("next_attempt_at")
      .limit(limit)
      .execute();
  },

  /**
   * Takes a due delivery for one try, held for `leaseMs` (longer than a try may last): a second
   * worker given the same job gets null. Its lapse after a worker died frees it for the sweep.
   */
  async claim(id: string, leaseMs: number): Promise<WebhookDelivery | null> {
    const row = await db
      .updateTable("webhook_deliveries")
      .set({ locked_until: sql<string>`clock_timestamp() + ${leaseMs} * interval '1 millisecond'` })
      .where("id", "=", id)
      .where("status", "=", "pending")
      .where("next_attempt_at", "<=", sql<string>`now()`)
      .where((eb) => eb.or([eb("locked_until", "is", null), eb("locked_until", "<", sql<string>`clock_timestamp()`)]))
      .returningAll()
      .executeTakeFirst();
    return row ? toDelivery(row) : null;
  },

  /**
   * Records one try and its consequence in one transaction: delivered, due again at `retryAt`,
   * or failed for good (no `retryAt`). Only the claim's holder writes: `attempt` must be the next.
   */
  async recordAttempt(
    id: string,
    attempt: number,
    startedAt: Date,
    durationMs: number,
    outcome: AttemptOutcome,
  ): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const res = await trx
        .updateTable("webhook_deliveries")
        .set(
          outcome.delivered
            ? {
                status: "delivered",
                delivered_at: sql<string>`clock_timestamp()`,
                attempts: attempt,
                locked_until: null,
              }
            : outcome.retryAt
              ? { attempts: attempt, next_attempt_at: outcome.retryAt.toISOString(), locked_until: null }
              : { status: "failed", attempts: attempt, locked_until: null },
        )
        .where("id", "=", id)
        .where("status", "=", "pending")
        .where("attempts", "=", attempt - 1)
        .executeTakeFirst();
      if (res.numUpdatedRows === 0n) return false;
      await trx
        .insertInto("webhook_delivery_attempts")
        .values({
          delivery_id: id,
          attempt,
          started_at: startedAt.toISOString(),
          duration_ms: Math.round(durationMs),
          status_code: outcome.statusCode,
          error: outcome.delivered ? null : outcome.error.slice(0, 1000),
        })
        .execute();
      return true;
    });
  },
});

export type WebhooksRepository = ReturnType<typeof webhooksRepository>;
