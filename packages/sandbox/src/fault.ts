import type { SandboxDriver, SandboxRef, SandboxState } from "./driver.ts";

/**
 * What a failed call on a sandbox meant, once the sandbox itself was looked at:
 * - `gone`: there is no such sandbox, or it failed; it will not run again.
 * - `paused`: frozen under the call; `resume` brings it back as it was.
 * - `not-running`: it exists but does not run (starting again, or its processes ended).
 * - `passing`: it runs, or it could not even be inspected: the failure was the call's own, and a
 *   retry may succeed. The caller throws the call's error.
 */
export type SandboxFault = "gone" | "paused" | "not-running" | "passing";

const faultOfState: Record<SandboxState, SandboxFault> = {
  running: "passing",
  paused: "paused",
  starting: "not-running",
  stopped: "not-running",
  failed: "gone",
};

/**
 * THE ONE REACTION TO A FAILED SANDBOX CALL: inspect the sandbox, and say whether it is gone,
 * paused or not running, or whether the failure was passing. Every caller that asks "did the
 * sandbox go away under me?" asks here, so a vanished, frozen or broken sandbox means the same
 * to a read, a command, the janitor and a run.
 */
export const sandboxFaultOf = async (
  driver: Pick<SandboxDriver, "inspect">,
  ref: SandboxRef,
): Promise<SandboxFault> => {
  const info = await driver.inspect(ref).catch(() => undefined);
  if (info === undefined) return "passing";
  return info === null ? "gone" : faultOfState[info.state];
};
