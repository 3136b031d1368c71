import type { SandboxInfo } from "./driver.ts";

/**
 * Where a pool records its warm sandboxes so others can claim them (rows in Postgres
 * the API claims in a start's own transaction). The pool keeps the containers; the store keeps
 * their rows, and whichever side takes a row first owns the sandbox: a row is claimed once.
 */
export interface WarmPoolStore {
  /** A new warm sandbox, claimable from the moment this resolves. */
  add(info: SandboxInfo): Promise<void>;
  /**
   * The pool takes the sandbox out (its own claim, a surplus or dead one removed): true when it
   * was still unclaimed, false when another claimant (the API) has it: then it is not the pool's
   * to hand out or remove.
   */
  take(info: SandboxInfo): Promise<boolean>;
  /** The names of the pool's sandboxes no claim took yet. */
  unclaimed(): Promise<Set<string>>;
  /** These were seen running just now (their rows' health). */
  touch(names: string[]): Promise<void>;
  /** Every unclaimed row of this owner goes (a pool starting under an id a dead process used). */
  removeAll(): Promise<void>;
}
