import { describe, expect, it } from "vitest";
import { userBaseUrlAccess, userBaseUrlRefusal } from "./llm-access.ts";
import type { Resolver } from "./outbound-address.ts";

/** Names only this map knows (never real DNS): one public, one that resolves to loopback. */
const hosts: Resolver = async (host) => {
  const map: Record<string, string> = { "llm.example.com": "93.184.216.34", "llm.rebind.example": "127.0.0.1" };
  const address = map[host.toLowerCase().replace(/\.$/, "")];
  if (!address) throw new Error(`${host}: unknown`);
  return [{ address, family: 4 }];
};

describe("a user's llm_base_url (LLM_USER_BASE_URLS)", () => {
  it("refuses a trailing dot or upper case on localhost, whatever the port", async () => {
    for (const url of ["https://localhost.:5432/v1", "https://LOCALHOST.:6379/v1", "https://api.localhost./v1"]) {
      expect(await userBaseUrlRefusal(url, [], hosts), url).toMatch(/inside the deployment/);
      expect(await userBaseUrlRefusal(url, ["*"], hosts), url).toMatch(/inside the deployment/);
    }
  });

  it("refuses a public-looking name that resolves to a loopback address", async () => {
    expect(await userBaseUrlRefusal("https://llm.rebind.example/v1", [], hosts)).toMatch(/127\.0\.0\.1/);
    expect(await userBaseUrlRefusal("https://LLM.REBIND.EXAMPLE./v1", ["*"], hosts)).toMatch(/127\.0\.0\.1/);
    // The positive control: a public name passes the same check.
    expect(await userBaseUrlRefusal("https://llm.example.com/v1", [], hosts)).toBeNull();
  });

  it("matches an entry on scheme, host and port, then path by whole segments, not as a string prefix", () => {
    const allowed = ["https://api.openai.com", "https://llm.example.com/v1"];
    expect(userBaseUrlAccess("https://api.openai.com.evil.example/v1", allowed).ok).toBe(false);
    expect(userBaseUrlAccess("https://api.openai.com@evil.example/v1", allowed).ok).toBe(false);
    expect(userBaseUrlAccess("https://api.openai.com:8443/v1", allowed).ok).toBe(false);
    expect(userBaseUrlAccess("http://api.openai.com/v1", allowed).ok).toBe(false);
    expect(userBaseUrlAccess("https://llm.example.com/v10", allowed).ok).toBe(false);
    expect(userBaseUrlAccess("https://llm.example.com/v1/../admin", allowed).ok).toBe(false);
    // What the entries do cover.
    expect(userBaseUrlAccess("https://api.openai.com/v1", allowed)).toMatchObject({ ok: true });
    expect(userBaseUrlAccess("https://API.OPENAI.COM.:443/v1", allowed)).toMatchObject({ ok: true });
    expect(userBaseUrlAccess("https://llm.example.com/v1", allowed)).toMatchObject({ ok: true });
    expect(userBaseUrlAccess("https://llm.example.com/v1/", allowed)).toMatchObject({ ok: true });
  });

  it("trusts an operator's entry as written, a private address and plain http included", async () => {
    const allowed = ["http://10.0.0.5:8000/v1"];
    const access = userBaseUrlAccess("http://10.0.0.5:8000/v1", allowed);
    expect(access).toMatchObject({ ok: true, policy: { allowPrivate: true, allowHttp: true } });
    expect(await userBaseUrlRefusal("http://10.0.0.5:8000/v1", allowed, hosts)).toBeNull();
    // Not another port of the same host.
    expect(await userBaseUrlRefusal("http://10.0.0.5:8001/v1", allowed, hosts)).toMatch(/LLM_USER_BASE_URLS/);
  });

  it("holds a URL no entry covers (under `*`) to the public rules", async () => {
    expect(userBaseUrlAccess("https://llm.example.com/v1", ["*"])).toMatchObject({
      ok: true,
      policy: { allowPrivate: false, allowHttp: false },
    });
    expect(await userBaseUrlRefusal("http://llm.example.com/v1", ["*"], hosts)).toMatch(/https/);
    expect(await userBaseUrlRefusal("https://10.0.0.5/v1", ["*"], hosts)).toMatch(/loopback, private/);
    expect(await userBaseUrlRefusal("https://user:pw@llm.example.com/v1", ["*"], hosts)).toMatch(/credentials/);
  });
});
