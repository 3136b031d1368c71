import Docker from "dockerode";

/**
 * Where the Docker engine is, in the Docker CLI's own variables. Unset fields mean what they mean
 * to docker-modem: no `host` is the local socket.
 */
export interface DockerEngine {
  /** DOCKER_HOST: `unix:///path`, `npipe://…`, `tcp://host:port`, `ssh://user@host[:port]`. */
  host?: string;
  /** DOCKER_TLS_VERIFY: "1" speaks https to a tcp host (so does port 2376). */
  tlsVerify?: string;
  /** DOCKER_CERT_PATH: the directory of `ca.pem`, `cert.pem` and `key.pem`. */
  certPath?: string;
  /** SSH_AUTH_SOCK: the ssh agent an `ssh://` host is reached with. */
  sshAuthSock?: string;
}

/** The engine named by the Docker CLI's variables (an environment, or settings parsed from one); "" is unset. */
export const dockerEngineFromEnv = (env: {
  DOCKER_HOST?: string | undefined;
  DOCKER_TLS_VERIFY?: string | undefined;
  DOCKER_CERT_PATH?: string | undefined;
  SSH_AUTH_SOCK?: string | undefined;
}): DockerEngine => ({
  ...(env.DOCKER_HOST ? { host: env.DOCKER_HOST } : {}),
  ...(env.DOCKER_TLS_VERIFY ? { tlsVerify: env.DOCKER_TLS_VERIFY } : {}),
  ...(env.DOCKER_CERT_PATH ? { certPath: env.DOCKER_CERT_PATH } : {}),
  ...(env.SSH_AUTH_SOCK ? { sshAuthSock: env.SSH_AUTH_SOCK } : {}),
});

/** Every variable docker-modem's constructor reads (docker-modem/lib/modem.js, `defaultOpts`). */
const MODEM_VARIABLES = [
  "DOCKER_HOST",
  "DOCKER_TLS_VERIFY",
  "DOCKER_CERT_PATH",
  "DOCKER_CLIENT_TIMEOUT",
  "DOCKER_PATH_PREFIX",
  "SSH_AUTH_SOCK",
] as const;

/**
 * A dockerode client for `engine`, connected the way the Docker CLI would be.
 *
 * docker-modem already knows what these variables mean (unix and npipe sockets, tcp, https when
 * DOCKER_TLS_VERIFY is 1 or the port is 2376, the certificates of DOCKER_CERT_PATH, ssh through
 * the agent of SSH_AUTH_SOCK), but it only reads them from `process.env`, in its constructor, and
 * exposes no parser of its own. Rather than copy that logic (a hand parser drifts: ours dropped TLS
 * and ssh), we lend it the configured values for the constructor call alone: the call is
 * synchronous, so nothing else runs while `process.env` holds them, and every variable it reads is
 * set from `engine` or cleared, so the configuration, not whatever the process inherited, decides.
 */
export const createDockerClient = (engine: DockerEngine = {}): Docker => {
  const lent: Record<(typeof MODEM_VARIABLES)[number], string | undefined> = {
    DOCKER_HOST: engine.host,
    DOCKER_TLS_VERIFY: engine.tlsVerify,
    DOCKER_CERT_PATH: engine.certPath,
    DOCKER_CLIENT_TIMEOUT: undefined,
    DOCKER_PATH_PREFIX: undefined,
    SSH_AUTH_SOCK: engine.sshAuthSock,
  };
  const saved = MODEM_VARIABLES.map((name) => [name, process.env[name]] as const);
  const put = (name: string, value: string | undefined) => {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  };
  try {
    for (const name of MODEM_VARIABLES) put(name, lent[name]);
    return new Docker();
  } finally {
    for (const [name, value] of saved) put(name, value);
  }
};
