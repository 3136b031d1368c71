import { type MessageContent, PayloadTooLargeError, QuotaExceededError } from "@tern/core";
import {
  agentServerConversationsRepository,
  apiKeysRepository,
  type Database,
  startTasksRepository,
  usersRepository,
} from "@tern/db";
import type { Kysely } from "kysely";
import type { TenantLimits } from "./deps.ts";

/** How long a refused start is told to wait: a start in flight finishes in seconds. */
const START_RETRY_AFTER_S = 10;
/** A live sandbox frees when its conversation is deleted, or when the janitor removes an old one. */
const SANDBOX_RETRY_AFTER_S = 60;
const KEY_RETRY_AFTER_S = 60;

/**
 * Inside the start's transaction: refuses a start (QuotaExceededError) that would take the user
 * past a quota. The user's row is locked first, so two starts racing for the last slot are
 * serialised: the second counts the first's task, and is refused.
 *
 * A start beyond MAX_SANDBOXES_PER_USER is refused rather than making room by pausing the user's
 * oldest sandbox, as OpenHands does: a paused container keeps its memory, so pausing bounds CPU
 * but not what a tenant holds. Deleting a conversation, or the janitor removing an old sandbox,
 * frees a slot.
 */
export const assertStartAllowed = async (
  trx: Kysely<Database>,
  userId: string,
  limits: TenantLimits | undefined,
): Promise<void> => {
  if (!limits || (!limits.maxSandboxesPerUser && !limits.maxStartsInFlightPerUser)) return;
  await usersRepository(trx).lockForQuota(userId);
  const err = startQuotaError(await startTasksRepository(trx).countHeldByUser(userId), limits);
  if (err) throw err;
};

/** The refusal of a start by what the user holds (null: within the quotas); the warm claim counts in SQL. */
export const startQuotaError = (
  held: { startsInFlight: number; liveSandboxes: number },
  limits: TenantLimits | undefined,
): QuotaExceededError | null => {
  const inFlight = limits?.maxStartsInFlightPerUser;
  if (inFlight && held.startsInFlight >= inFlight) {
    return new QuotaExceededError(
      `Quota MAX_STARTS_IN_FLIGHT_PER_USER reached: ${held.startsInFlight} of ${inFlight} starts and agent-server ` +
        "runs are still in progress; wait until one is READY or ERROR, or ends",
      "MAX_STARTS_IN_FLIGHT_PER_USER",
      inFlight,
      START_RETRY_AFTER_S,
    );
  }
  const sandboxes = limits?.maxSandboxesPerUser;
  if (sandboxes && held.liveSandboxes >= sandboxes) {
    return new QuotaExceededError(
      `Quota MAX_SANDBOXES_PER_USER reached: ${held.liveSandboxes} of ${sandboxes} sandboxes are live ` +
        "(starting, running or paused); delete a conversation (DELETE /api/v1/app-conversations/{id}) to free one",
      "MAX_SANDBOXES_PER_USER",
      sandboxes,
      SANDBOX_RETRY_AFTER_S,
    );
  }
  return null;
};

/**
 * Refuses (QuotaExceededError) a run of an agent-server conversation that would take its user past
 * MAX_STARTS_IN_FLIGHT_PER_USER: the user's work in progress (tern_work_in_progress: starts in
 * flight and the runs of their other agent-server conversations) is what that quota bounds, for a
 * start as for such a run. An app conversation holds a sandbox of its own, bounded by the sandbox
 * quotas; the agent server's hold none, so without this one tenant's runs could take every agent
 * slot of an engine. Inside the transaction that asks for the run, the user's row locked first (as
 * for a start). `isNew`: a conversation not written yet (its start), one of the agent server's.
 */
export const assertAgentRunAllowed = async (
  trx: Kysely<Database>,
  conversation: { id: string; userId: string },
  limits: TenantLimits | undefined,
  opts: { isNew?: boolean } = {},
): Promise<void> => {
  const max = limits?.maxStartsInFlightPerUser;
  if (!max) return;
  if (!opts.isNew && !(await agentServerConversationsRepository(trx).get(conversation.id))) return;
  await usersRepository(trx).lockForQuota(conversation.userId);
  const inProgress = await startTasksRepository(trx).workInProgressBeside(conversation.userId, conversation.id);
  if (inProgress >= max) {
    throw new QuotaExceededError(
      `Quota MAX_STARTS_IN_FLIGHT_PER_USER reached: ${inProgress} of ${max} starts and agent-server runs of yours ` +
        "are in progress; wait until one ends",
      "MAX_STARTS_IN_FLIGHT_PER_USER",
      max,
      START_RETRY_AFTER_S,
    );
  }
};

/** Inside the key's transaction: refuses a key beyond MAX_KEYS_PER_USER live ones (serialised per user). */
export const assertKeyAllowed = async (trx: Kysely<Database>, userId: string, maxKeys: number | undefined) => {
  if (!maxKeys) return;
  await usersRepository(trx).lockForQuota(userId);
  const live = await apiKeysRepository(trx).countLiveForUser(userId);
  if (live >= maxKeys) {
    throw new QuotaExceededError(
      `Quota MAX_KEYS_PER_USER reached: ${live} of ${maxKeys} keys are live; revoke one (DELETE /api/keys/{id}) first`,
      "MAX_KEYS_PER_USER",
      maxKeys,
      KEY_RETRY_AFTER_S,
    );
  }
};

/** The text of a message (and its image URLs, stored alike), in UTF-8 bytes: what MAX_MESSAGE_BYTES bounds. */
const messageBytes = (content: readonly MessageContent[]): number =>
  content.reduce(
    (sum, block) =>
      sum +
      (block.type === "text"
        ? Buffer.byteLength(block.text, "utf8")
        : block.image_urls.reduce((n, u) => n + Buffer.byteLength(u, "utf8"), 0)),
    0,
  );

/** Refuses (PayloadTooLargeError) a message whose text is longer than MAX_MESSAGE_BYTES. */
export const assertMessageSize = (content: readonly MessageContent[], limits: TenantLimits | undefined): void => {
  const max = limits?.maxMessageBytes;
  if (!max) return;
  const bytes = messageBytes(content);
  if (bytes > max) {
    throw new PayloadTooLargeError(
      `The message's text is ${bytes} bytes; at most ${max} are allowed (MAX_MESSAGE_BYTES)`,
      { limit: max, bytes },
    );
  }
};
