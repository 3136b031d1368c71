import {
  generateSessionApiKey,
  isSandboxGone,
  newId,
  type OwnedSandbox,
  parseId,
  type Sandbox,
  type SecretBox,
  sealSessionApiKey,
  toHexId,
  UnauthorizedError,
} from "@tern/core";
import { sandboxesRepository, startTasksRepository, userSecretsRepository } from "@tern/db";
import { enqueue } from "@tern/queue";
import type { ServiceDeps } from "./deps.ts";
import { assertQueueReady, withJobQueue } from "./queue-availability.ts";
import { assertStartAllowed } from "./quotas.ts";
import { type SandboxImagesConfig, specOfStart } from "./sandbox-specs.ts";
import { userSecretContext } from "./secrets.ts";
import { holderOfSessionKey } from "./session-keys.ts";

/** The name of a sandbox made on its own: fixed when its row is written, unique as every sandbox's. */
const sandboxNameOf = (sandboxId: string) => `tern-sandbox-${toHexId(sandboxId)}`;

/**
 * A sandbox without a conversation (POST /api/v1/sandboxes, as OpenHands' app server makes one for
 * `OpenHandsCloudWorkspace`): a start task of kind "sandbox", which a worker takes through the one
 * stage a conversation's start begins with (WAITING_FOR_SANDBOX: a warm sandbox when the pool has
 * one) and then ends READY. So it is counted against the user's quotas, retried when its worker
 * dies, swept by the janitor when its job is lost, and cleaned up when it fails, exactly as every
 * start. The sandbox's row is written here, STARTING, with its own session key (hashed and sealed
 * as the conversations' are), so the caller gets its id and key at once.
 * `specId` is a spec of GET /api/v1/sandbox-specs (null: the default, SANDBOX_IMAGE); the row keeps it
 * as the sandbox's image, and the worker makes the sandbox from that spec's runtime image.
 */
export const startSandbox = async (
  deps: Pick<ServiceDeps, "db" | "queues" | "redis" | "logger" | "queueTimeoutMs" | "limits"> & {
    secretBox: SecretBox;
    config: SandboxImagesConfig;
  },
  userId: string,
  specId: string | null,
): Promise<OwnedSandbox> => {
  const image = (await specOfStart(deps, specId, "query")) ?? deps.config.SANDBOX_IMAGE;
  assertQueueReady(deps);
  const sandboxId = newId();
  const key = sealSessionApiKey(deps.secretBox, sandboxId, generateSessionApiKey());
  return deps.db.transaction().execute(async (trx) => {
    await assertStartAllowed(trx, userId, deps.limits);
    const task = await startTasksRepository(trx).create(userId, {}, newId(), "sandbox");
    await sandboxesRepository(trx).upsert({
      id: sandboxId,
      name: sandboxNameOf(sandboxId),
      image,
      startTaskId: task.id,
      status: "STARTING",
      sessionApiKey: key,
    });
    await withJobQueue(deps, () => enqueue(deps.queues, "conversation.start", { taskId: task.id }), {
      task_id: task.id,
      sandbox_id: sandboxId,
    });
    const [owned] = await sandboxesRepository(trx).findForUser(userId, [sandboxId]);
    if (!owned) throw new Error(`sandbox ${sandboxId} was not recorded`);
    return owned;
  });
};

const unauthorized = () => new UnauthorizedError("Unauthorized");

/**
 * The sandbox `rawSandboxId` names, when `key` is THAT sandbox's own key (a sandbox made by POST
 * /api/v1/sandboxes, whose agent server OpenHands runs with the user's secrets). Any other key, a
 * conversation's included (tern runs no agent server in a sandbox that would need them), and a
 * sandbox that is gone, is 401 alike: the key opens its own sandbox's settings and nothing else.
 */
export const sandboxOfSessionKey = async (
  deps: Pick<ServiceDeps, "db">,
  rawSandboxId: string,
  key: string | null,
): Promise<Sandbox> => {
  const sandboxId = parseId(rawSandboxId);
  if (!key || sandboxId === null) throw unauthorized();
  const holder = await holderOfSessionKey(deps, key);
  const sandbox = holder?.kind === "sandbox" ? holder.sandbox : null;
  if (!sandbox || sandbox.id !== sandboxId) throw unauthorized();
  if (isSandboxGone(sandbox.status)) throw unauthorized();
  return sandbox;
};

/** The user's secrets by name, with their descriptions (never their values). */
export const sandboxSecretNames = async (
  deps: Pick<ServiceDeps, "db">,
  userId: string,
): Promise<{ name: string; description: string | null }[]> =>
  (await userSecretsRepository(deps.db).list(userId)).map((s) => ({ name: s.name, description: s.description }));

/** One secret's value, or null when the user has none of that name (or it no longer opens). */
export const sandboxSecretValue = async (
  deps: Pick<ServiceDeps, "db"> & { secretBox: SecretBox },
  userId: string,
  name: string,
): Promise<string | null> => {
  const secret = await userSecretsRepository(deps.db).get(userId, name);
  if (!secret) return null;
  try {
    return deps.secretBox.open(secret.sealedValue, userSecretContext(userId, name));
  } catch {
    return null;
  }
};
