import { randomBytes } from "node:crypto";
import {
  type CreateWebhookRequest,
  NotFoundError,
  newId,
  OutboundAddressError,
  type OutboundAddressPolicy,
  parseId,
  parseOutboundUrl,
  QuotaExceededError,
  type Resolver,
  resolveOutboundAddresses,
  type SecretBox,
  ValidationError,
} from "@tern/core";
import {
  type Database,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryAttempt,
  webhookSecretContext,
  webhooksRepository,
} from "@tern/db";
import type { Kysely } from "kysely";
import { newestFirstPage, type Page, type PagedReadDeps } from "./paging.ts";

export interface WebhookDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
  policy: OutboundAddressPolicy;
  /** MAX_WEBHOOKS_PER_USER; 0 or none: no limit. */
  maxWebhooksPerUser?: number;
  /** Name resolution, for tests; the system resolver by default. */
  resolve?: Resolver;
}

/** A new signing secret in Standard Webhooks' form: whsec_ and the base64 of 32 random bytes. */
export const generateWebhookSecret = (): string => `whsec_${randomBytes(32).toString("base64")}`;

const invalidUrl = (message: string) => new ValidationError(`url: ${message}`, [{ field: "url", in: "json", message }]);

/**
 * Registers a webhook of `userId`. The URL must be https (unless WEBHOOK_ALLOW_HTTP) and resolve
 * only to public addresses (unless WEBHOOK_ALLOW_PRIVATE): ValidationError otherwise. The secret
 * is generated when not given, stored sealed, and returned this once.
 */
export const registerWebhook = async (
  deps: WebhookDeps,
  userId: string,
  input: CreateWebhookRequest,
): Promise<{ webhook: Webhook; secret: string }> => {
  let url: URL;
  try {
    url = parseOutboundUrl(input.url, deps.policy, "WEBHOOK");
    await resolveOutboundAddresses(url, deps.policy, "WEBHOOK", deps.resolve);
  } catch (err) {
    if (err instanceof OutboundAddressError) throw invalidUrl(err.message);
    throw err;
  }
  const repo = webhooksRepository(deps.db);
  const max = deps.maxWebhooksPerUser ?? 0;
  if (max > 0 && (await repo.countForUser(userId)) >= max) {
    throw new QuotaExceededError(
      `At most ${max} webhooks per user (MAX_WEBHOOKS_PER_USER); delete one first`,
      "MAX_WEBHOOKS_PER_USER",
      max,
      60,
    );
  }
  const secret = input.secret ?? generateWebhookSecret();
  const id = newId();
  const webhook = await repo.create({
    id,
    userId,
    url: url.toString(),
    events: [...new Set(input.events)],
    secretSealed: deps.secretBox.seal(secret, webhookSecretContext(id)),
  });
  return { webhook, secret };
};

export const listWebhooks = (deps: Pick<WebhookDeps, "db">, userId: string): Promise<Webhook[]> =>
  webhooksRepository(deps.db).listForUser(userId);

/** The caller's live webhook; NotFoundError for a malformed or unknown id, or another user's. */
export const getOwnWebhook = async (deps: Pick<WebhookDeps, "db">, userId: string, rawId: string): Promise<Webhook> => {
  const id = parseId(rawId);
  const webhook = id === null ? null : await webhooksRepository(deps.db).getForUser(userId, id);
  if (!webhook) throw new NotFoundError("No such webhook");
  return webhook;
};

/** One of the caller's webhooks' deliveries, newest first, each with its attempts; NotFoundError for another's. */
export const listWebhookDeliveries = async (
  deps: PagedReadDeps,
  userId: string,
  rawId: string,
  req: { limit: number; pageId: string | undefined },
): Promise<Page<WebhookDelivery & { attemptList: WebhookDeliveryAttempt[] }>> => {
  const webhook = await getOwnWebhook(deps, userId, rawId);
  return newestFirstPage({
    secret: deps.config.cursorSecret,
    scope: `webhook-deliveries:${webhook.id}`,
    limit: req.limit,
    pageId: req.pageId,
    fetch: (after) => webhooksRepository(deps.db).listDeliveries(webhook.id, { limit: req.limit, after }),
  });
};

/** Deletes one of the caller's webhooks; its pending deliveries end failed. Returns its id. */
export const deleteWebhook = async (deps: Pick<WebhookDeps, "db">, userId: string, rawId: string): Promise<string> => {
  const id = parseId(rawId);
  if (id === null || !(await webhooksRepository(deps.db).deleteForUser(userId, id))) {
    throw new NotFoundError("No such webhook");
  }
  return id;
};
