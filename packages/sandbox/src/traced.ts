import { SpanKind, withSpan } from "@tern/core";
import type { SandboxDriver } from "./driver.ts";

const traced = ["create", "exec", "upload", "download", "pause", "resume", "destroy", "inspect", "list"] as const;

/**
 * The driver with a client span around each engine call (sandbox.create, sandbox.exec...), a child
 * of whatever is active: a start's stage span shows the Docker calls it made.
 */
export const traceSandboxDriver = (driver: SandboxDriver): SandboxDriver => {
  const wrapped: SandboxDriver = { ...driver };
  for (const name of traced) {
    const call = driver[name] as (...args: unknown[]) => Promise<unknown>;
    (wrapped as unknown as Record<string, unknown>)[name] = (...args: unknown[]) =>
      withSpan(
        `sandbox.${name}`,
        { "tern.sandbox.driver_call": name, ...(typeof args[0] === "string" ? { "tern.sandbox.ref": args[0] } : {}) },
        () => call.apply(driver, args),
        { kind: SpanKind.CLIENT },
      );
  }
  return wrapped;
};
