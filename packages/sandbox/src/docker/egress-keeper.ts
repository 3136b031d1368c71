import { type Logger, startPeriodicTask } from "@tern/core";
import type { ContainmentState, SandboxEgress, UnresolvedEgressName } from "../driver.ts";
import { type KnownAddresses, type ResolvedEgressPolicy, type Resolver, resolveEgress } from "./egress-names.ts";

/** Names are resolved again this often unless the policy says (SANDBOX_EGRESS_REFRESH_MS). */
const DEFAULT_EGRESS_REFRESH_MS = 60_000;
/** A name that did not resolve is tried again after this, then twice as long each time, up to the refresh. */
const FIRST_RETRY_MS = 2_000;

export interface EgressKeeperOptions {
  egress: SandboxEgress;
  /** Writes the rules; throws when they cannot be installed at all. */
  install: (policy: ResolvedEgressPolicy) => Promise<void>;
  resolve?: Resolver;
  logger?: Logger;
  now?: () => number;
}

export interface EgressKeeper {
  state(): NonNullable<ContainmentState["egress"]>;
  /** Resolves every name now and rewrites the rules when an address changed; for the timer and tests. */
  refresh(): Promise<void>;
  /** No refresh after this; resolves once the one under way ended. */
  stop(): Promise<void>;
}

/**
 * Keeps a sandbox network's egress rules in step with DNS. A name is never a reason to hold every
 * sandbox without rules, nor to stop a worker: the rules are written with what resolves, a name
 * that does not is logged and reported (`state().unresolved`) and retried with backoff, and one
 * that stops resolving keeps the addresses it last had. Names are resolved again on a timer, since
 * hosts move. Only rules that cannot be installed at all are fatal, and only at start
 * (`startEgressKeeper` throws); later, the rules in place stay and the failure is logged.
 */
export const startEgressKeeper = async (opts: EgressKeeperOptions): Promise<EgressKeeper> => {
  const now = opts.now ?? Date.now;
  const refreshMs = opts.egress.refreshMs ?? DEFAULT_EGRESS_REFRESH_MS;
  const known: KnownAddresses = new Map();
  const unresolved = new Map<string, UnresolvedEgressName>();
  let installed = "";
  let refreshedAt = new Date(now()).toISOString();
  let retryMs = FIRST_RETRY_MS;

  const resolveAndInstall = async () => {
    const { policy, unresolved: failed } = await resolveEgress(opts.egress, opts.resolve, known);
    refreshedAt = new Date(now()).toISOString();
    const failedNames = new Set(failed.map((f) => f.name));
    for (const name of unresolved.keys()) {
      if (!failedNames.has(name)) {
        unresolved.delete(name);
        opts.logger?.info({ name }, "egress name resolves again; its rules are written");
      }
    }
    for (const f of failed) {
      const first = !unresolved.has(f.name);
      unresolved.set(f.name, { name: f.name, reason: f.reason, since: unresolved.get(f.name)?.since ?? refreshedAt });
      if (first) {
        opts.logger?.warn(
          { name: f.name, reason: f.reason, kept: known.get(f.name) ?? [] },
          "egress name does not resolve; the rest of the policy is installed and the name is retried",
        );
      }
    }
    const key = JSON.stringify(policy);
    if (key !== installed) {
      await opts.install(policy);
      if (installed) opts.logger?.info({ mode: policy.mode }, "egress rules rewritten with new addresses");
      installed = key;
    }
  };

  /** The refresh, or sooner while a name does not resolve (backing off up to the refresh). */
  const nextRefreshInMs = () => {
    const delay = unresolved.size > 0 ? Math.min(retryMs, refreshMs) : refreshMs;
    retryMs = unresolved.size > 0 ? Math.min(retryMs * 2, refreshMs) : FIRST_RETRY_MS;
    return delay;
  };

  await resolveAndInstall();
  // A refresh that fails leaves the rules in place; the next one tries again.
  const refreshing = startPeriodicTask("rewriting the egress rules", resolveAndInstall, {
    firstAfterMs: nextRefreshInMs(),
    everyMs: nextRefreshInMs,
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
  return {
    state: () => ({ mode: opts.egress.mode, unresolved: [...unresolved.values()], refreshedAt }),
    refresh: resolveAndInstall,
    stop: refreshing.stop,
  };
};
