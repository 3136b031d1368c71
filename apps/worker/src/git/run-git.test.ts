import { describe, expect, it } from "vitest";
import { gitEnvFor } from "./run-git.ts";

const configOf = (env: Record<string, string>) => {
  const out: Record<string, string> = {};
  for (let i = 0; i < Number(env.GIT_CONFIG_COUNT); i++)
    out[env[`GIT_CONFIG_KEY_${i}`]!] = env[`GIT_CONFIG_VALUE_${i}`]!;
  return out;
};

describe("gitEnvFor", () => {
  const access = {
    url: "https://github.com/acme/app.git",
    provider: "github" as const,
    token: "s3cret-token",
    allowHttp: false,
  };

  it("allows https only, checks objects, follows no redirect, and reads no config but its own", () => {
    const env = gitEnvFor(access, "/tmp/home");
    expect(configOf(env)).toMatchObject({
      "protocol.allow": "never",
      "protocol.https.allow": "always",
      "transfer.fsckObjects": "true",
      "http.followRedirects": "false",
      "credential.helper": "",
      "core.hooksPath": "/dev/null",
    });
    expect(configOf(env)["protocol.http.allow"]).toBeUndefined();
    expect(env).toMatchObject({
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
      HOME: "/tmp/home",
    });
  });

  it("sends the token only as a header scoped to the repository's URL", () => {
    const config = configOf(gitEnvFor(access, "/h"));
    expect(config["http.https://github.com/acme/app.git.extraHeader"]).toBe(
      `Authorization: Basic ${Buffer.from("x-access-token:s3cret-token").toString("base64")}`,
    );
    expect(Object.keys(config).filter((k) => /extraheader/i.test(k))).toHaveLength(1);
    expect(JSON.stringify(gitEnvFor({ ...access, token: null }, "/h"))).not.toContain("Authorization");
  });

  it("lets local files be a transport only for a process without the token", () => {
    expect(configOf(gitEnvFor({ ...access, token: null }, "/h", { allowFile: true }))["protocol.file.allow"]).toBe(
      "always",
    );
    expect(configOf(gitEnvFor(access, "/h", { allowFile: true }))["protocol.file.allow"]).toBeUndefined();
  });
});
