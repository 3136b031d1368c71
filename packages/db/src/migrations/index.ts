import type { Migration } from "kysely/migration";
import * as m0001 from "./20261122_0001_initial.ts";

/** Append-only, ordered by name. Add a file, then list it here. */
export const migrations: Record<string, Migration> = {
  "20261122_0001_initial": m0001,
};
