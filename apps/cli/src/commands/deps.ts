import type { SecretBox } from "@tern/core";
import type { KeyDeps } from "@tern/services";

/** What every command may use; the secret box is built only by the commands that need it. */
export interface CliDeps extends KeyDeps {
  secretBox: () => SecretBox;
}
