import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { freePort, repoRoot, waitFor } from "@tern/testing";

/** A floor: a Hono app in its own process answering `body` at any GET path, no auth, no database. */
export const spawnBareHono = async (body: string) => {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ["--import", "tsx", fileURLToPath(new URL("./bare-hono.ts", import.meta.url))],
    {
      cwd: repoRoot,
      env: { ...process.env, PORT: String(port), BARE_BODY: body },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`bare hono exited (${child.exitCode}) before it listened`);
      return out.includes("listening");
    },
    { what: "bare hono to listen", timeoutMs: 20_000, intervalMs: 25 },
  );
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill("SIGTERM");
      if (child.exitCode === null) await once(child, "exit");
    },
  };
};
