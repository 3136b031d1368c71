import { execFileSync } from "node:child_process";

/**
 * The storage driver of a Docker engine and, for overlay2, the filesystem under it ("overlay2 on
 * extfs", "overlay2 on xfs", "btrfs"), as `docker info` reports it. It sets how fast the engine
 * makes containers (and which disk limit it can hold), so every floor made of containers names it.
 * `host`: a DOCKER_HOST; unset, the engine of this process's environment.
 */
export const engineStorage = (host?: string): string => {
  try {
    return execFileSync(
      "docker",
      [
        "info",
        "--format",
        '{{.Driver}}{{range .DriverStatus}}{{if eq (index . 0) "Backing Filesystem"}} on {{index . 1}}{{end}}{{end}}',
      ],
      {
        encoding: "utf8",
        env: host ? { ...process.env, DOCKER_HOST: host } : process.env,
        stdio: ["ignore", "pipe", "ignore"],
        timeout: 15_000,
      },
    ).trim();
  } catch {
    return "unknown storage";
  }
};
