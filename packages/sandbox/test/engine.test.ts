import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, parseConfig } from "@tern/core";
import { containmentOptOut } from "@tern/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createDockerClient, type DockerEngine } from "../src/docker/engine.ts";
import { createSandboxDriver, dockerEngineFromEnv, sandboxConfigFields, sandboxDriverConfig } from "../src/index.ts";

/** What docker-modem derived from the variables (its own fields; the types leave them out). */
interface ModemView {
  socketPath?: string | (() => Promise<string>);
  host?: string;
  port?: string;
  protocol?: string;
  username?: string;
  pathPrefix?: string;
  sshOptions?: { agent?: string };
  ca?: string[];
  cert?: Buffer;
  key?: Buffer;
}

/** As the worker does: its environment parsed with the sandbox's config fields, then the driver's configuration. */
const configFrom = (env: Record<string, string>) =>
  sandboxDriverConfig(parseConfig(z.object(sandboxConfigFields), env));

const engineFrom = (env: Record<string, string>): DockerEngine => configFrom(env).engine ?? {};

const modemOf = (engine: DockerEngine): ModemView => createDockerClient(engine).modem as ModemView;

let certs = "";

beforeAll(async () => {
  certs = await mkdtemp(join(tmpdir(), "tern-docker-certs-"));
  await writeFile(join(certs, "ca.pem"), "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n");
  await writeFile(join(certs, "cert.pem"), "client certificate");
  await writeFile(join(certs, "key.pem"), "client key");
});

afterAll(async () => {
  await rm(certs, { recursive: true, force: true });
});

describe("the Docker engine, as docker-modem reads DOCKER_HOST and its TLS and ssh settings", () => {
  it("unix://: the socket at that path", () => {
    const modem = modemOf(engineFrom({ DOCKER_HOST: "unix:///var/run/docker.sock" }));
    expect(modem.socketPath).toBe("/var/run/docker.sock");
    expect(modem.host).toBeUndefined();
  });

  it("ssh://: ssh to that user and host, through the configured agent", () => {
    const modem = modemOf(
      engineFrom({ DOCKER_HOST: "ssh://deploy@docker.example:2222", SSH_AUTH_SOCK: "/tmp/agent.sock" }),
    );
    expect(modem).toMatchObject({ protocol: "ssh", username: "deploy", host: "docker.example", port: "2222" });
    expect(modem.sshOptions?.agent).toBe("/tmp/agent.sock");
  });

  it("tcp:// with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH: https with the client certificate", () => {
    const modem = modemOf(
      engineFrom({ DOCKER_HOST: "tcp://docker.example:2376", DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certs }),
    );
    expect(modem).toMatchObject({ protocol: "https", host: "docker.example", port: "2376" });
    expect(modem.ca).toEqual(["-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----"]);
    expect(modem.cert?.toString()).toBe("client certificate");
    expect(modem.key?.toString()).toBe("client key");
  });

  it("tcp:// without TLS: plain http", () => {
    expect(modemOf(engineFrom({ DOCKER_HOST: "tcp://10.0.0.5:2375", DOCKER_TLS_VERIFY: "0" }))).toMatchObject({
      protocol: "http",
      host: "10.0.0.5",
      port: "2375",
    });
  });

  it("follows the configuration, not the environment the process inherited, and leaves that untouched", () => {
    const before = { DOCKER_HOST: process.env.DOCKER_HOST, DOCKER_TLS_VERIFY: process.env.DOCKER_TLS_VERIFY };
    process.env.DOCKER_HOST = "tcp://inherited.example:2376";
    process.env.DOCKER_TLS_VERIFY = "1";
    try {
      // No host configured: the local socket, whatever DOCKER_HOST the process has.
      const modem = modemOf(engineFrom({}));
      expect(modem.host).toBeUndefined();
      expect(typeof modem.socketPath).toBe("function");
      expect(process.env.DOCKER_HOST).toBe("tcp://inherited.example:2376");
      expect(process.env.DOCKER_TLS_VERIFY).toBe("1");
    } finally {
      for (const [name, value] of Object.entries(before)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it("takes the engine's variables from an environment, and nothing else", () => {
    const env: Record<string, string> = {
      DOCKER_HOST: "ssh://me@host",
      DOCKER_TLS_VERIFY: "",
      DOCKER_CERT_PATH: "/certs",
      SSH_AUTH_SOCK: "/agent",
      HOME: "/home/me",
    };
    expect(dockerEngineFromEnv(env)).toEqual({ host: "ssh://me@host", certPath: "/certs", sshAuthSock: "/agent" });
  });

  it("refuses a DOCKER_TLS_VERIFY docker-modem would not read as on, naming it", () => {
    expect(() => configFrom({ DOCKER_TLS_VERIFY: "true" })).toThrowError(ConfigError);
    expect(() => configFrom({ DOCKER_TLS_VERIFY: "true" })).toThrowError(/DOCKER_TLS_VERIFY/);
    expect(() => configFrom({ SANDBOX_DRIVER: "podman" })).toThrowError(/SANDBOX_DRIVER/);
  });

  it.skipIf(!existsSync("/var/run/docker.sock"))(
    "a driver built from DOCKER_HOST=unix:///var/run/docker.sock reaches that engine",
    async () => {
      const driver = createSandboxDriver(
        configFrom({
          DOCKER_HOST: "unix:///var/run/docker.sock",
          SANDBOX_NETWORK: process.env.SANDBOX_NETWORK ?? "tern-sandboxes",
          // What this proves is the engine reached; containment has its own tests, on an engine of their own.
          ...containmentOptOut,
        }),
      );
      const prepared = await driver.prepare();
      expect(prepared.hostAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    },
  );
});
