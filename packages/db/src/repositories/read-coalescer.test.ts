import { waitFor } from "@tern/testing";
import { describe, expect, it } from "vitest";
import { createReadCoalescer } from "./read-coalescer.ts";

interface Row {
  id: string;
  owner: string;
  version: number;
}

/**
 * A table whose load, like a statement, reads the rows as they are when it starts and answers
 * when `release` is called: a read that joined a statement already started would see old rows.
 */
const fakeTable = (rows: Row[]) => {
  const table = new Map(rows.map((r) => [r.id, r]));
  const loads: { keys: string[]; release: () => void; fail: (err: Error) => void }[] = [];
  const coalescer = createReadCoalescer<Row>({
    load: (keys) => {
      const snapshot = keys.flatMap((k) => {
        const r = table.get(k);
        return r ? [{ ...r }] : [];
      });
      return new Promise((resolve, reject) => {
        loads.push({ keys, release: () => resolve(snapshot), fail: reject });
      });
    },
    keyOf: (r) => r.id,
    ownerOf: (r) => r.owner,
    maxKeys: 4,
  });
  const started = (n: number) =>
    waitFor(() => loads[n - 1], { what: `load ${n} to start`, timeoutMs: 2_000, intervalMs: 1, inProcess: true });
  return { table, loads, coalescer, started };
};

describe("read coalescer", () => {
  it("answers the reads of one turn with one load of their distinct keys, each caller only its owner's rows", async () => {
    const t = fakeTable([
      { id: "a1", owner: "alice", version: 1 },
      { id: "a2", owner: "alice", version: 1 },
      { id: "b1", owner: "bob", version: 1 },
    ]);
    const alice = t.coalescer.read("alice", ["a2", "b1", "a1", "a2", "zz"]);
    const bob = t.coalescer.read("bob", ["a1", "b1"]);
    (await t.started(1)).release();
    // The owner's rows, each once, in the order asked; the other owner's and the unknown left out.
    expect((await alice).map((r) => r.id)).toEqual(["a2", "a1"]);
    expect((await bob).map((r) => r.id)).toEqual(["b1"]);
    expect(t.loads.map((l) => l.keys.sort())).toEqual([["a1", "a2", "b1", "zz"]]);
    expect(t.coalescer.stats).toEqual({ batches: 1, reads: 2 });
  });

  it("gathers the reads asked while a load is in flight into the next load, which sees what was written meanwhile", async () => {
    const t = fakeTable([{ id: "a1", owner: "alice", version: 1 }]);
    const first = t.coalescer.read("alice", ["a1"]);
    const inFlight = await t.started(1);
    // Written (committed) after the first load began, then read: the read must see it.
    t.table.set("a1", { id: "a1", owner: "alice", version: 2 });
    t.table.set("a9", { id: "a9", owner: "alice", version: 1 });
    const second = t.coalescer.read("alice", ["a1", "a9"]);
    const third = t.coalescer.read("alice", ["a1"]);
    await new Promise((r) => setImmediate(r));
    expect(t.loads).toHaveLength(1); // nothing more while one is in flight
    inFlight.release();
    expect(await first).toEqual([{ id: "a1", owner: "alice", version: 1 }]);
    (await t.started(2)).release();
    expect(await second).toEqual([
      { id: "a1", owner: "alice", version: 2 },
      { id: "a9", owner: "alice", version: 1 },
    ]);
    expect(await third).toEqual([{ id: "a1", owner: "alice", version: 2 }]);
    expect(t.coalescer.stats).toEqual({ batches: 2, reads: 3 });
  });

  it("answers every read of a failed load with its error, and goes on with the next", async () => {
    const t = fakeTable([{ id: "a1", owner: "alice", version: 1 }]);
    const failing = [t.coalescer.read("alice", ["a1"]), t.coalescer.read("bob", ["b1"])];
    const load = await t.started(1);
    const next = t.coalescer.read("alice", ["a1"]);
    load.fail(new Error("statement timeout"));
    for (const r of await Promise.allSettled(failing)) {
      expect(r).toMatchObject({ status: "rejected", reason: { message: "statement timeout" } });
    }
    (await t.started(2)).release();
    expect((await next).map((r) => r.id)).toEqual(["a1"]);
  });

  it("keeps a load to its key bound: the read that would pass it waits for the next", async () => {
    const t = fakeTable([]);
    const reads = [
      t.coalescer.read("alice", ["k1", "k2", "k3"]),
      t.coalescer.read("alice", ["k3", "k4"]), // one new key: fits (4)
      t.coalescer.read("alice", ["k5"]), // would make 5
      t.coalescer.read("alice", ["k1", "k2", "k3", "k4", "k5", "k6"]), // alone, even past the bound
    ];
    (await t.started(1)).release();
    (await t.started(2)).release();
    (await t.started(3)).release();
    await Promise.all(reads);
    expect(t.loads.map((l) => l.keys)).toEqual([
      ["k1", "k2", "k3", "k4"],
      ["k5"],
      ["k1", "k2", "k3", "k4", "k5", "k6"],
    ]);
  });

  it("answers an empty read at once, without a load", async () => {
    const t = fakeTable([]);
    expect(await t.coalescer.read("alice", [])).toEqual([]);
    expect(t.loads).toHaveLength(0);
  });
});
