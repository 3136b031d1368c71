import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { advertisedUrl } from "./index.ts";

describe("advertisedUrl (where the API reaches a worker's server)", () => {
  it("is WORKER_ADVERTISE_URL when set, without a trailing slash", () => {
    expect(advertisedUrl({ WORKER_ADVERTISE_URL: "http://w1.internal:3001/", WORKER_HTTP_HOST: "0.0.0.0" }, 3001)).toBe(
      "http://w1.internal:3001",
    );
  });

  it("is this host by name when listening on every address, else the address listened on", () => {
    expect(advertisedUrl({ WORKER_ADVERTISE_URL: undefined, WORKER_HTTP_HOST: "0.0.0.0" }, 4001)).toBe(
      `http://${hostname()}:4001`,
    );
    expect(advertisedUrl({ WORKER_ADVERTISE_URL: undefined, WORKER_HTTP_HOST: "127.0.0.1" }, 4002)).toBe(
      "http://127.0.0.1:4002",
    );
    expect(advertisedUrl({ WORKER_ADVERTISE_URL: undefined, WORKER_HTTP_HOST: "fd00::5" }, 4003)).toBe(
      "http://[fd00::5]:4003",
    );
  });
});
