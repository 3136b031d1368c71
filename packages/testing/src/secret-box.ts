import { createSecretBox, generateSecretsKey, parseSecretsKeys, type SecretBox } from "@tern/core";

/**
 * This test file's SECRETS_KEY: the services it spawns get it (startService), and testSecretBox()
 * seals under it, so what a test seals in-process opens in a spawned worker or API.
 */
export const testSecretsKey = generateSecretsKey();

/** A secret box under this test file's key, for deps that a test builds in-process. */
export const testSecretBox = (): SecretBox => createSecretBox(parseSecretsKeys(testSecretsKey));
