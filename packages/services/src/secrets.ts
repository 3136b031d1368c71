import {
  ConflictError,
  type Conversation,
  MAX_SECRET_VALUE_BYTES,
  MAX_SECRETS_PER_USER,
  maskSecrets,
  NotFoundError,
  type SecretBox,
  secretNameSchema,
  ValidationError,
} from "@tern/core";
import {
  type Database,
  gitProvidersRepository,
  type StoredUserSecret,
  startTaskSecretsRepository,
  userSecretsRepository,
  userSettingsRepository,
  webhooksRepository,
} from "@tern/db";
import type { Kysely } from "kysely";
import { inTransaction } from "./transaction.ts";

/**
 * A user's secrets, sealed at rest with the deployment's secret box. Each sealed value is
 * bound to where it lives (its context below): copied to another user's or name's row, it does not
 * open. Values never leave this module but as the environment of the agent's commands
 * (`agentSecretEnv`), which also masks them in everything the run stores.
 */
export interface SecretDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
}

export const userSecretContext = (userId: string, name: string) => `secret:${userId}:${name}`;
export const startSecretContext = (taskId: string, name: string) => `start-secret:${taskId}:${name}`;
export const llmKeyContext = (userId: string) => `settings:${userId}:llm_api_key`;
export const mcpConfigContext = (userId: string) => `settings:${userId}:mcp_config`;

/** What OpenHands shows for a write-only value (its SecretStr): the name stays, the value never. */
export const MASKED_VALUE = "**********";

const invalid = (field: string, message: string) =>
  new ValidationError(`${field}: ${message}`, [{ field, in: "json", message }]);

const checkValue = (value: string) => {
  if (Buffer.byteLength(value, "utf8") > MAX_SECRET_VALUE_BYTES) {
    throw invalid("value", `at most ${MAX_SECRET_VALUE_BYTES} bytes (64 KiB)`);
  }
};

export const listSecrets = (deps: Pick<SecretDeps, "db">, userId: string): Promise<StoredUserSecret[]> =>
  userSecretsRepository(deps.db).list(userId);

/**
 * A new secret. ValidationError past 64 KiB or past 100 secrets; ConflictError when the user has one
 * of that name (the count and the insert serialised per user, so two creates cannot both take the last slot).
 */
export const createSecret = async (
  deps: SecretDeps,
  userId: string,
  input: { name: string; value: string; description?: string | null },
): Promise<StoredUserSecret> => {
  checkValue(input.value);
  const sealedValue = deps.secretBox.seal(input.value, userSecretContext(userId, input.name));
  return inTransaction(deps.db, async (trx) => {
    await trx.selectFrom("users").select("id").where("id", "=", userId).forNoKeyUpdate().executeTakeFirst();
    const secrets = userSecretsRepository(trx);
    if (await secrets.get(userId, input.name)) throw new ConflictError(`A secret named ${input.name} exists already`);
    if ((await secrets.count(userId)) >= MAX_SECRETS_PER_USER) {
      throw invalid("name", `a user keeps at most ${MAX_SECRETS_PER_USER} secrets; delete one first`);
    }
    const created = await secrets.create({
      userId,
      name: input.name,
      description: input.description ?? null,
      sealedValue,
    });
    if (!created) throw new ConflictError(`A secret named ${input.name} exists already`);
    return created;
  });
};

/** Changes a secret's value and/or description; NotFoundError when the user has none of that name. */
export const updateSecret = async (
  deps: SecretDeps,
  userId: string,
  name: string,
  change: { value?: string; description?: string | null },
): Promise<StoredUserSecret> => {
  if (!secretNameSchema.safeParse(name).success) throw new NotFoundError("No such secret");
  if (change.value !== undefined) checkValue(change.value);
  const updated = await userSecretsRepository(deps.db).update(userId, name, {
    description: change.description,
    sealedValue:
      change.value === undefined ? undefined : deps.secretBox.seal(change.value, userSecretContext(userId, name)),
  });
  if (!updated) throw new NotFoundError("No such secret");
  return updated;
};

export const deleteSecret = async (deps: Pick<SecretDeps, "db">, userId: string, name: string): Promise<void> => {
  // A name no secret can have (say, with a NUL byte Postgres would refuse) names none.
  if (!secretNameSchema.safeParse(name).success) throw new NotFoundError("No such secret");
  if (!(await userSecretsRepository(deps.db).delete(userId, name))) throw new NotFoundError("No such secret");
};

/**
 * The start request's `secrets`: sealed beside the task (bound to it), and the request as it is
 * kept and echoed, with each value replaced by MASKED_VALUE. Call inside the task's transaction.
 */
export const storeStartSecrets = async (
  deps: SecretDeps,
  taskId: string,
  secrets: Record<string, string>,
): Promise<void> => {
  const sealed = Object.fromEntries(
    Object.entries(secrets).map(([name, value]) => [
      name,
      deps.secretBox.seal(value, startSecretContext(taskId, name)),
    ]),
  );
  await startTaskSecretsRepository(deps.db).put(taskId, sealed);
};

/** `secrets` of a start request with their values hidden: what the task keeps and echoes. */
export const maskedSecrets = (secrets: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.keys(secrets).map((name) => [name, MASKED_VALUE]));

/**
 * THE ONE PATH FROM SECRETS TO A SANDBOX: name → value of the environment the agent's commands get,
 * for a conversation. The user's secrets, then the start request's over them (as OpenHands merges
 * them: the request's win). The caller must also mask every value in whatever it stores or logs
 * (maskSecrets). Provider tokens and LLM keys are never among them: those stay in the worker.
 * A value that no longer opens (sealed under a key SECRETS_KEY has dropped) is left out, by name.
 */
export const agentSecretEnv = async (
  deps: SecretDeps,
  conversation: Pick<Conversation, "userId" | "startTaskId">,
  onUnreadable: (name: string) => void = () => {},
): Promise<Record<string, string>> => {
  const env: Record<string, string> = {};
  const open = (sealed: string, context: string, name: string) => {
    try {
      env[name] = deps.secretBox.open(sealed, context);
    } catch {
      onUnreadable(name);
    }
  };
  for (const s of await userSecretsRepository(deps.db).list(conversation.userId)) {
    open(s.sealedValue, userSecretContext(conversation.userId, s.name), s.name);
  }
  if (conversation.startTaskId) {
    const taskId = conversation.startTaskId;
    for (const [name, sealed] of Object.entries(await startTaskSecretsRepository(deps.db).get(taskId))) {
      open(sealed, startSecretContext(taskId, name), name);
    }
  }
  return env;
};

/**
 * A user's message as it is stored: every secret value of the conversation (the user's and the
 * start request's) replaced by `<secret:NAME>`, as in every other stored event. Text blocks only;
 * other blocks pass unchanged.
 */
export const maskMessageContent = async <B extends { type: string }>(
  deps: SecretDeps,
  conversation: Pick<Conversation, "userId" | "startTaskId">,
  content: B[],
): Promise<B[]> => {
  const secrets = await agentSecretEnv(deps, conversation);
  if (Object.keys(secrets).length === 0) return content;
  return content.map((b) =>
    b.type === "text" && typeof (b as { text?: unknown }).text === "string"
      ? { ...b, text: maskSecrets((b as unknown as { text: string }).text, secrets) }
      : b,
  );
};

export interface RotationResult {
  /** Values sealed again under the first key of SECRETS_KEY. */
  resealed: number;
  /** Values under that key already. */
  current: number;
  /** Values that did not open (their key is not in SECRETS_KEY any more, or tampered with). */
  unreadable: number;
}

/**
 * Seals every stored value again under the secret box's sealing key (the first of SECRETS_KEY):
 * user secrets, start-request secrets, users' LLM keys and MCP configs, git provider tokens and webhook signing secrets. Run it after putting a new key first
 * (the old one after it); once it reports nothing unreadable, the old key may be dropped. A value
 * changed meanwhile is left as its writer sealed it (under the new key already).
 */
export const rotateSecrets = async (deps: SecretDeps): Promise<RotationResult> => {
  const result: RotationResult = { resealed: 0, current: 0, unreadable: 0 };
  const box = deps.secretBox;
  const reseal = async (sealed: string, context: string, write: (to: string) => Promise<boolean>) => {
    if (box.keyIdOf(sealed) === box.keyId) {
      result.current++;
      return;
    }
    let plain: string;
    try {
      plain = box.open(sealed, context);
    } catch {
      result.unreadable++;
      return;
    }
    if (await write(box.seal(plain, context))) result.resealed++;
  };
  const secrets = userSecretsRepository(deps.db);
  for (const s of await secrets.listAllSealed()) {
    await reseal(s.sealedValue, userSecretContext(s.userId, s.name), (to) =>
      secrets.reseal(s.userId, s.name, s.sealedValue, to),
    );
  }
  const startSecrets = startTaskSecretsRepository(deps.db);
  for (const s of await startSecrets.listAllSealed()) {
    await reseal(s.sealedValue, startSecretContext(s.startTaskId, s.name), (to) =>
      startSecrets.reseal(s.startTaskId, s.name, s.sealedValue, to),
    );
  }
  const settings = userSettingsRepository(deps.db);
  for (const s of await settings.listAllSealed()) {
    await reseal(s.sealedValue, llmKeyContext(s.userId), (to) => settings.reseal(s.userId, s.sealedValue, to));
  }
  for (const s of await settings.listAllSealedMcpConfigs()) {
    await reseal(s.sealedValue, mcpConfigContext(s.userId), (to) =>
      settings.resealMcpConfig(s.userId, s.sealedValue, to),
    );
  }
  // Git provider tokens and webhook signing secrets: their repositories walk them and write what this returns.
  const resealOne = (sealed: string, context: string): string => {
    if (box.keyIdOf(sealed) === box.keyId) {
      result.current++;
      return sealed;
    }
    try {
      const next = box.seal(box.open(sealed, context), context);
      result.resealed++;
      return next;
    } catch {
      result.unreadable++;
      return sealed;
    }
  };
  await gitProvidersRepository(deps.db).resealAll(resealOne);
  await webhooksRepository(deps.db).resealAll(resealOne);
  return result;
};
