import { describe, expect, it } from "vitest";
import { OutputBuffer } from "./output-buffer.ts";

describe("OutputBuffer", () => {
  it("keeps everything under the cap", () => {
    const b = new OutputBuffer(100);
    b.push(Buffer.from("hello "));
    b.push(Buffer.from("world"));
    expect(b.toString()).toBe("hello world");
    expect(b.truncated).toBe(false);
  });

  it("keeps the head and the tail of long output and says how much was dropped", () => {
    const b = new OutputBuffer(10);
    for (const c of "abcdefghijklmnopqrstuvwxyz") b.push(Buffer.from(c));
    expect(b.truncated).toBe(true);
    expect(b.toString()).toBe("abcde\n[... 16 bytes omitted ...]\nvwxyz");
  });

  it("splits a single large chunk", () => {
    const b = new OutputBuffer(4);
    b.push(Buffer.from("0123456789"));
    expect(b.toString()).toBe("01\n[... 6 bytes omitted ...]\n89");
  });
});
