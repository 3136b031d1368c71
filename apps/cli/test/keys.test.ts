import { spawnSync } from "node:child_process";
import { appEntry, createTestDatabase, repoRoot, scaled, type TestDatabase } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** The CLI as operators run it (`pnpm cli keys create`), against a database of its own. */
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database?.drop());

// The setting comes from the test alone: absent unless a test gives it.
const { API_KEY_MAX_LIFETIME_DAYS: _, ...baseEnv } = process.env;

const cli = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [...appEntry("cli"), ...args], {
    cwd: repoRoot,
    env: { ...baseEnv, DATABASE_URL: database.url, ...env },
    encoding: "utf8",
    timeout: scaled(30_000),
  });

const daysAhead = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();

const keysNamed = (name: string) =>
  database.db.selectFrom("api_keys").select(["expires_at"]).where("name", "=", name).execute();

describe("cli keys create --expires-at", () => {
  it("refuses an expiry past API_KEY_MAX_LIFETIME_DAYS, naming the flag, and writes nothing", async () => {
    const res = cli(["keys", "create", "--name", "too-long", "--expires-at", daysAhead(60)], {
      API_KEY_MAX_LIFETIME_DAYS: "30",
    });
    expect(res.status, res.stderr).toBe(64);
    expect(res.stdout).toBe("");
    expect(res.stderr).toBe("--expires-at: at most 30 days ahead\n");
    expect(await keysNamed("too-long")).toEqual([]);
  });

  it("holds to the default cap (365 days) when the setting is absent", async () => {
    const res = cli(["keys", "create", "--name", "default-cap", "--expires-at", daysAhead(400)]);
    expect(res.status, res.stderr).toBe(64);
    expect(res.stderr).toBe("--expires-at: at most 365 days ahead\n");
    expect(await keysNamed("default-cap")).toEqual([]);
  });

  it("issues a key that expires within the cap, and refuses a time in the past or not ISO 8601", async () => {
    const expires = daysAhead(10);
    const made = cli(["keys", "create", "--name", "brief", "--expires-at", expires], {
      API_KEY_MAX_LIFETIME_DAYS: "30",
    });
    expect(made.status, made.stderr).toBe(0);
    expect(made.stdout).toMatch(/^oh_[A-Za-z0-9_-]+\n$/);
    const [row] = await keysNamed("brief");
    expect(Date.parse(row?.expires_at ?? "")).toBe(Date.parse(expires));

    expect(cli(["keys", "create", "--name", "past", "--expires-at", daysAhead(-1)]).stderr).toBe(
      "--expires-at: must be in the future\n",
    );
    expect(cli(["keys", "create", "--name", "vague", "--expires-at", "next tuesday"]).status).toBe(64);
    expect(await keysNamed("past")).toEqual([]);
  });
});
