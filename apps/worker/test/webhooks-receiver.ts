import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedDelivery {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * A webhook receiver on this machine: records every request, and answers each with what
 * `answer` decides (a status, or "hang": never answer, as a receiver whose sender died).
 */
export const startReceiver = async (answer: (n: number, req: ReceivedDelivery) => number | "hang" = () => 200) => {
  const received: ReceivedDelivery[] = [];
  const hanging: ServerResponse[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      const r = { at: Date.now(), headers: req.headers, body };
      received.push(r);
      const a = answer(received.length, r);
      if (a === "hang") {
        hanging.push(res);
        return;
      }
      res.writeHead(a, { "content-type": "text/plain" }).end(a >= 400 ? "receiver is down" : "ok");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    port: (server.address() as AddressInfo).port,
    received,
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
};

/** The Standard Webhooks headers of a received request, as the verifier takes them. */
export const signatureHeaders = (r: ReceivedDelivery): Record<string, string> => ({
  "webhook-id": String(r.headers["webhook-id"]),
  "webhook-timestamp": String(r.headers["webhook-timestamp"]),
  "webhook-signature": String(r.headers["webhook-signature"]),
});
