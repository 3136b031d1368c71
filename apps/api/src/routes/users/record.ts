import { toHexId, type User, type UserRecord } from "@tern/core";
import type { StoredUserSettings } from "@tern/services";
import { toSettingsRecord } from "../settings/record.ts";

/** OpenHands' UserInfo: the user with their settings (never the key, only llm_api_key_set). */
export const toUserRecord = (u: User, s: StoredUserSettings): UserRecord => ({
  id: toHexId(u.id),
  name: u.name,
  is_admin: u.isAdmin,
  created_at: u.createdAt,
  ...toSettingsRecord(s),
});
