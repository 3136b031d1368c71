import type { Kysely } from "kysely";
import type { Database } from "../schema.ts";

export const deploymentSecretsRepository = (db: Kysely<Database>) => ({
  /**
   * The secret named `name`: the stored one, else `generate()`'s, stored first. Two processes
   * starting at once both end up with the one that was inserted first.
   */
  async getOrCreate(name: string, generate: () => string): Promise<string> {
    await db
      .insertInto("deployment_secrets")
      .values({ name, value: generate() })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
    const row = await db
      .selectFrom("deployment_secrets")
      .select("value")
      .where("name", "=", name)
      .executeTakeFirstOrThrow();
    return row.value;
  },
});
