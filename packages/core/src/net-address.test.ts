import { describe, expect, it } from "vitest";
import { userBaseUrlAccess } from "./llm-access.ts";
import { isNonPublicAddress, nonPublicAddressOf } from "./net-address.ts";

describe("non-public addresses (one rule for webhooks, git hosts and LLM base URLs)", () => {
  it.each([
    "127.0.0.1",
    "10.255.77.1",
    "172.31.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fd00::1",
    "fe80::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "not-an-address",
  ])("%s is not public", (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each(["1.1.1.1", "93.184.216.34", "2606:4700::1111", "::ffff:1.1.1.1"])("%s is public", (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });

  it("resolves names and literals, bracketed or not", async () => {
    expect(await nonPublicAddressOf("localhost")).not.toBeNull();
    expect(await nonPublicAddressOf("[::1]")).toBe("::1");
    expect(await nonPublicAddressOf("1.1.1.1")).toBeNull();
    expect(await nonPublicAddressOf("no-such-host.invalid")).toBeNull();
  });

  it("refuses LLM base URLs on such addresses, but not public names that merely look alike", () => {
    const reason = (url: string) => {
      const access = userBaseUrlAccess(url);
      return access.ok ? null : access.reason;
    };
    expect(reason("https://[::ffff:a9fe:a9fe]/v1")).toMatch(/loopback, private or link-local/);
    expect(reason("https://169.254.169.254/v1")).toMatch(/loopback, private or link-local/);
    expect(reason("https://fdexample.com/v1")).toBeNull();
  });
});
