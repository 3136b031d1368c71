import { toHexId } from "@tern/core";
import type { GitProviderAccount } from "@tern/services";

export const toGitProviderRecord = (p: GitProviderAccount) => ({
  id: toHexId(p.id),
  provider: p.provider,
  host: p.host,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});
