import { type GitProvider, NotFoundError, parseId, type SecretBox } from "@tern/core";
import { type Database, gitProviderSealContext, gitProvidersRepository, type StoredGitProvider } from "@tern/db";
import type { Kysely } from "kysely";

export interface GitProviderDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
}

/** A user's git account as shown: never its token. */
export interface GitProviderAccount {
  id: string;
  provider: GitProvider;
  host: string | null;
  createdAt: string;
  updatedAt: string;
}

const shown = (p: StoredGitProvider): GitProviderAccount => ({
  id: p.id,
  provider: p.provider,
  host: p.host,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt,
});

/**
 * Sets the user's account for a provider: the token sealed at once (bound to this user and
 * provider), replacing an earlier one of the same provider. The token is checked by the provider
 * when a clone or push uses it, not here (a refusal then names the provider, never the token).
 */
export const setGitProvider = async (
  deps: GitProviderDeps,
  userId: string,
  input: { provider: GitProvider; token: string; host?: string | null },
): Promise<GitProviderAccount> => {
  const tokenSealed = deps.secretBox.seal(input.token, gitProviderSealContext(userId, input.provider));
  const stored = await gitProvidersRepository(deps.db).upsert({
    userId,
    provider: input.provider,
    host: input.host?.trim().replace(/\/+$/, "").toLowerCase() || null,
    tokenSealed,
  });
  return shown(stored);
};

export const listGitProviders = async (deps: Pick<GitProviderDeps, "db">, userId: string) =>
  (await gitProvidersRepository(deps.db).listForUser(userId)).map(shown);

/** NotFoundError for a malformed or unknown id, and for another user's. */
export const deleteGitProvider = async (deps: Pick<GitProviderDeps, "db">, userId: string, rawId: string) => {
  const id = parseId(rawId);
  if (id === null || !(await gitProvidersRepository(deps.db).delete(userId, id))) {
    throw new NotFoundError("No such git provider");
  }
  return id;
};
