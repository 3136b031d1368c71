import type { SecretRecord } from "@tern/core";
import type { StoredUserSecret } from "@tern/services";

/** A secret as a client reads it: never its value. */
export const toSecretRecord = (s: StoredUserSecret): SecretRecord => ({
  name: s.name,
  description: s.description,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
});
