import type { Migration } from "kysely/migration";
import * as m0001 from "./20261122_0001_initial.ts";
import * as m0003 from "./20261122_0003_setup_output.ts";
import * as m0004 from "./20261122_0004_agent_runs.ts";

/** Append-only, ordered by name. Add a file, then list it here. */
export const migrations: Record<string, Migration> = {
  "20261122_0001_initial": m0001,
  "20261122_0003_setup_output": m0003,
  "20261122_0004_agent_runs": m0004,
};
