import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createSecretBox,
  generateSecretsKey,
  loadSecretsKeys,
  maskSecrets,
  parseSecretsKeys,
  SecretBoxError,
} from "./secret-box.ts";

const key = () => parseSecretsKeys(generateSecretsKey())[0]!;

describe("the secret box", () => {
  it("round-trips, never shows the plaintext, and binds the context", () => {
    const box = createSecretBox([key()]);
    const sealed = box.seal("hunter2-canary", "secret:u1:TOKEN");
    expect(sealed).not.toContain("hunter2");
    expect(box.keyIdOf(sealed)).toBe(box.keyId);
    expect(box.open(sealed, "secret:u1:TOKEN")).toBe("hunter2-canary");
    expect(() => box.open(sealed, "secret:u2:TOKEN")).toThrow(SecretBoxError);
  });

  it("refuses a tampered value", () => {
    const box = createSecretBox([key()]);
    const p = box.seal("value").split(".");
    p[3] = Buffer.from("other").toString("base64url");
    expect(() => box.open(p.join("."))).toThrow(SecretBoxError);
    expect(() => box.open("plaintext")).toThrow(SecretBoxError);
  });

  it("rotates: the new key seals, the old one still opens", () => {
    const [oldKey, newKey] = [key(), key()];
    const sealed = createSecretBox([oldKey]).seal("v");
    const both = createSecretBox([newKey, oldKey]);
    expect(both.open(sealed)).toBe("v");
    expect(both.keyIdOf(both.seal("v"))).not.toBe(both.keyIdOf(sealed));
    expect(() => createSecretBox([newKey]).open(sealed)).toThrow(/does not hold/);
  });

  it("generates a key file with mode 0600 once, and reads it back", () => {
    const file = join(mkdtempSync(join(tmpdir(), "tern-key-")), "sub", "secrets.key");
    const first = loadSecretsKeys({ keyFile: file });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(loadSecretsKeys({ keyFile: file })[0]!.equals(first[0]!)).toBe(true);
    expect(readFileSync(file, "utf8").trim().length).toBeGreaterThan(40);
    expect(() => loadSecretsKeys({ keyFile: file, required: true })).toThrow(/required/);
    expect(() => parseSecretsKeys("short")).toThrow(/32 bytes/);
  });

  it("masks every value, longest first", () => {
    expect(maskSecrets("a=abcd1234 b=abcd", { A: "abcd1234", B: "abcd", C: "x" })).toBe("a=<secret:A> b=<secret:B>");
  });
});
