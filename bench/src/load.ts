import { readFile } from "node:fs/promises";
import autocannon from "autocannon";

export interface LoadResult {
  requestsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  total: number;
  non2xx: number;
  errors: number;
}

/** Drives `url` with autocannon (in this process) for `seconds`; every request must answer 2xx. */
export const loadTest = async (opts: {
  url: string;
  headers?: Record<string, string>;
  seconds: number;
  connections: number;
  pipelining?: number;
}): Promise<LoadResult> => {
  const r = await autocannon({
    url: opts.url,
    headers: opts.headers ?? {},
    duration: opts.seconds,
    connections: opts.connections,
    pipelining: opts.pipelining ?? 1,
  });
  return {
    requestsPerSec: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors,
  };
};

/** Resident set size of a process in MiB, from /proc/<pid>/status (VmRSS). */
export const rssMiB = async (pid: number): Promise<number> => {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
};

/** Samples RSS every `everyMs` until stopped; returns the samples. */
export const sampleRss = (pid: number, everyMs = 100): { stop: () => number[] } => {
  const samples: number[] = [];
  const timer = setInterval(() => {
    rssMiB(pid)
      .then((v) => samples.push(v))
      .catch(() => undefined);
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      return samples;
    },
  };
};
