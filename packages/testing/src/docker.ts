import { ensureSandboxNetwork, SandboxLabel, type SandboxNetwork } from "@tern/sandbox";
import Docker from "dockerode";

/** The engine tests use (DOCKER_HOST respected by dockerode). */
export const testDocker = (): Docker => new Docker();

export const testSandboxNetworkName = (): string => process.env.SANDBOX_NETWORK ?? "tern-sandboxes";

/** The network sandboxes run on in tests; its gateway is where a test's git server listens. */
export const ensureTestSandboxNetwork = (docker: Docker = testDocker()): Promise<SandboxNetwork> =>
  ensureSandboxNetwork(docker, testSandboxNetworkName());

/** Every container (any state) of one deployment namespace, i.e. one test file's REDIS_PREFIX. */
export const containersOfNamespace = async (namespace: string, docker: Docker = testDocker()) =>
  docker.listContainers({
    all: true,
    filters: JSON.stringify({ label: [`${SandboxLabel.Marker}`, `${SandboxLabel.Namespace}=${namespace}`] }),
  });

/** Removes every container of a namespace; returns how many there were. */
export const removeContainersOfNamespace = async (
  namespace: string,
  docker: Docker = testDocker(),
): Promise<number> => {
  const found = await containersOfNamespace(namespace, docker);
  await Promise.all(
    found.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => undefined),
    ),
  );
  return found.length;
};
