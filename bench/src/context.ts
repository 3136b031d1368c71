import { randomBytes } from "node:crypto";
import Docker from "dockerode";

/** What every section gets: the run's size and the clients it shares. */
export interface BenchContext {
  quick: boolean;
  docker: Docker;
  image: string;
  /** Unique per run; labels and names of every container the bench makes carry it. */
  runId: string;
  /** Progress lines go to stderr; the table goes to stdout. */
  progress: (msg: string) => void;
  /** Processes whose RSS the rss section reports, filled by the sections that spawn them. */
  rss: RssSamples;
}

export interface RssSamples {
  api: { idle: number[]; load: number[] };
  worker: { idle: number[]; load: number[] };
}

export const dockerFromEnv = (host = process.env.DOCKER_HOST): Docker => {
  if (!host) return new Docker();
  if (host.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  const u = new URL(host.replace(/^tcp:/, "http:"));
  return new Docker({ host: u.hostname, port: Number(u.port || 2375) });
};

export const createContext = (quick: boolean): BenchContext => {
  const started = Date.now();
  return {
    quick,
    docker: dockerFromEnv(),
    image: process.env.SANDBOX_IMAGE ?? "tern-sandbox:latest",
    runId: randomBytes(4).toString("hex"),
    progress: (msg) => process.stderr.write(`[bench +${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`),
    rss: { api: { idle: [], load: [] }, worker: { idle: [], load: [] } },
  };
};
