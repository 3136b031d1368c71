import { randomBytes } from "node:crypto";
import { dockerEngineFromEnv, type SandboxDriver } from "@tern/sandbox";
import { createDockerProbe, type DockerProbe } from "@tern/sandbox/docker";
import { testSandboxDriver } from "@tern/testing";
import { engineStorage } from "./engine-storage.ts";

/** What every section gets: the run's size and the clients it shares. */
export interface BenchContext {
  /** Small sizes: `--quick`, and the CI gate's `--gate`. */
  quick: boolean;
  /**
   * `--gate`: only the rows the CI speed gate compares with their floors, each small (bench/test/gate.test.ts);
   * no bursts, steady rates or throughput.
   */
  gate: boolean;
  /** The driver the service uses, on the test network: cleanup by label. */
  sandboxes: SandboxDriver;
  /** Docker below the driver: the floor every start row is measured against. */
  floor: DockerProbe;
  /** The storage driver of that engine (engineStorage), named beside every floor made of containers. */
  storage: string;
  image: string;
  /** Unique per run; labels and names of every container the bench makes carry it. */
  runId: string;
  /** Progress lines go to stderr; the table goes to stdout. */
  progress: (msg: string) => void;
  /** Processes whose RSS the rss section reports, filled by the sections that spawn them. */
  rss: RssSamples;
}

interface RssSamples {
  api: { idle: number[]; load: number[] };
  worker: { idle: number[]; load: number[] };
}

export const createContext = (quick: boolean, gate = false): BenchContext => {
  const started = Date.now();
  return {
    quick: quick || gate,
    gate,
    sandboxes: testSandboxDriver(),
    floor: createDockerProbe(dockerEngineFromEnv(process.env)),
    storage: engineStorage(),
    image: process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest",
    runId: randomBytes(4).toString("hex"),
    progress: (msg) => process.stderr.write(`[bench +${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`),
    rss: { api: { idle: [], load: [] }, worker: { idle: [], load: [] } },
  };
};
