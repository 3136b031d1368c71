/**
 * The HTTP floor of the authenticated batch GET, of the events search and of a warm start's round
 * trip: a bare Hono app on @hono/node-server in its own process (as the API runs in its own),
 * answering a fixed JSON body of the same size as the API's answer at any GET path, and at any POST
 * path after reading the request's body: no auth, no database. Started by the bench with
 * `node --import tsx bare-hono.ts` (spawnBareHono).
 */
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const body = JSON.parse(process.env.BARE_BODY ?? "[]") as unknown;
const app = new Hono();
app.get("*", (c) => c.json(body));
app.post("*", async (c) => {
  await c.req.json();
  return c.json(body);
});
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: "127.0.0.1" }, (info) => {
  process.stdout.write(`bare hono listening on ${info.port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
