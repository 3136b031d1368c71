import {
  createRedisPrefix,
  createTestDatabase,
  deleteRedisPrefix,
  type GitServer,
  prepareTestSandboxes,
  startGitServer,
  testSandboxNetworkName,
} from "@tern/testing";
import type { BenchContext } from "../../context.ts";
import { type Deployment, startDeployment } from "../../starts.ts";

const SETUP_SCRIPT = "#!/bin/sh\nset -e\necho 'installing' > /tmp/setup.log\nls -la >> /tmp/setup.log\n";
const PRE_COMMIT = "#!/bin/sh\nset -e\ngit diff --cached --check\n";
const SKILL =
  "---\nname: testing\ntriggers:\n  - test\n---\nRun the tests with `python3 -m pytest tests` before each commit.\n";
/**
 * The shape of a user's repository as the README describes it: a setup script, a pre-commit hook and
 * a skill, so the repository rows (the repeat start's most) do the hook and skill stages users' do.
 */
const REPO_FILES = {
  "src/app.py": "print('hello')\n",
  "tests/test_app.py": "def test_ok():\n    assert True\n",
  ".openhands/setup.sh": SETUP_SCRIPT,
  ".openhands/pre-commit.sh": PRE_COMMIT,
  ".openhands/skills/testing.md": SKILL,
  "AGENTS.md": "Keep changes small; explain why in each commit message.\n",
};

/** What every ready row shares: the sandbox network, a git server with the bench's repository, one database. */
export interface ReadyEnvironment {
  /** Starts per sequential run. */
  n: number;
  network: string;
  git: GitServer;
  /** API + `workers` worker processes on a Redis prefix of their own; the caller stops it. */
  deployment: (workers: number, poolSize: number, env?: Record<string, string>) => Promise<Deployment>;
  close: () => Promise<void>;
}

export const readyEnvironment = async (ctx: BenchContext): Promise<ReadyEnvironment> => {
  const { hostAddress } = await prepareTestSandboxes(ctx.sandboxes);
  const network = testSandboxNetworkName();
  const git = await startGitServer({ host: hostAddress });
  await git.createFixtureRepo("bench/app", REPO_FILES);
  const db = await createTestDatabase();
  const prefixes: string[] = [];
  return {
    // The gate compares medians: a few more samples than a quick run's steady them, few enough
    // that it stays a small part of the suite it runs beside.
    n: ctx.gate ? 6 : ctx.quick ? 5 : 50,
    network,
    git,
    deployment: async (workers, poolSize, env = {}) => {
      const prefix = createRedisPrefix();
      prefixes.push(prefix);
      return startDeployment({
        databaseUrl: db.url,
        prefix,
        workers,
        poolSize,
        env: { GIT_BASE_URL: git.url, SANDBOX_NETWORK: network, ...env },
      });
    },
    close: async () => {
      await git.close();
      await db.drop();
      for (const p of prefixes) await deleteRedisPrefix(p);
    },
  };
};
