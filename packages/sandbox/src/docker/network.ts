import type Docker from "dockerode";

export interface SandboxNetwork {
  name: string;
  id: string;
  /** The host's address on the network: the only host address sandboxes are meant to reach. */
  gateway: string;
}

const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number }).statusCode;

const describe = async (docker: Docker, name: string): Promise<SandboxNetwork | null> => {
  try {
    const info = await docker.getNetwork(name).inspect();
    const gateway = (info.IPAM?.Config ?? []).map((c: { Gateway?: string }) => c.Gateway).find(Boolean);
    if (!gateway) throw new Error(`network ${name} has no gateway address`);
    return { name, id: info.Id, gateway };
  } catch (err) {
    if (statusOf(err) === 404) return null;
    throw err;
  }
};

/**
 * The sandboxes' own bridge network, created when missing. Containers on it cannot talk to
 * each other (icc off) and publish no ports; they reach the outside through the bridge only.
 */
export const ensureSandboxNetwork = async (docker: Docker, name: string): Promise<SandboxNetwork> => {
  const found = await describe(docker, name);
  if (found) return found;
  try {
    await docker.createNetwork({
      Name: name,
      Driver: "bridge",
      CheckDuplicate: true,
      Labels: { "tern.network": "1" },
      Options: { "com.docker.network.bridge.enable_icc": "false" },
    });
  } catch (err) {
    // Another worker created it first.
    if (statusOf(err) !== 409) throw err;
  }
  const created = await describe(docker, name);
  if (!created) throw new Error(`network ${name} could not be created`);
  return created;
};
