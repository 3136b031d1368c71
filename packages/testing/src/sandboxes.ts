import {
  createSandboxDriver,
  dockerEngineFromEnv,
  type SandboxDriver,
  type SandboxInfo,
  SandboxLabel,
} from "@tern/sandbox";
import { testSandboxNetworkName } from "./test-networks.ts";

/**
 * The sandbox driver tests use: the engine of DOCKER_HOST (with its TLS and ssh settings, as the
 * worker reads them), sandboxes on the test network.
 */
export const testSandboxDriver = (): SandboxDriver =>
  createSandboxDriver({
    driver: "docker",
    engine: dockerEngineFromEnv(process.env),
    network: testSandboxNetworkName(),
  });

/**
 * Readies the test driver (the network sandboxes run on) and returns the address sandboxes reach
 * this host at: where a test's git server listens.
 */
export const prepareTestSandboxes = async (
  driver: SandboxDriver = testSandboxDriver(),
): Promise<{ hostAddress: string }> => {
  const { hostAddress } = await driver.prepare();
  if (!hostAddress) throw new Error("the test sandboxes cannot reach this host");
  return { hostAddress };
};

/** Every sandbox (any state) of one deployment namespace, i.e. one test file's REDIS_PREFIX. */
export const sandboxesOfNamespace = async (
  namespace: string,
  driver: SandboxDriver = testSandboxDriver(),
): Promise<SandboxInfo[]> => driver.list({ [SandboxLabel.Marker]: "1", [SandboxLabel.Namespace]: namespace });

/** Removes every sandbox of a namespace; returns how many there were. */
export const removeSandboxesOfNamespace = async (
  namespace: string,
  driver: SandboxDriver = testSandboxDriver(),
): Promise<number> => {
  const found = await sandboxesOfNamespace(namespace, driver);
  await Promise.all(found.map((c) => driver.destroy(c.ref).catch(() => undefined)));
  // The repository snapshots its starts took (images labelled with the namespace), once no sandbox runs from them.
  const images = (await driver.listImages?.({ [SandboxLabel.Namespace]: namespace }).catch(() => [])) ?? [];
  await Promise.all(images.map((i) => driver.removeImage?.(i.image).catch(() => undefined)));
  return found.length;
};
