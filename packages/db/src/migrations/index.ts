import type { Migration } from "kysely/migration";
import * as m0001 from "./20261122_0001_initial.ts";
import * as m0003 from "./20261122_0003_setup_output.ts";
import * as m0004 from "./20261122_0004_agent_runs.ts";
import * as m0005 from "./20261123_0005_sandbox_refs.ts";
import * as m0020 from "./20261123_0020_sandbox_owner.ts";
import * as m0021 from "./20261123_0021_conversation_hooks.ts";
import * as m0022 from "./20261123_0022_deployment_secrets.ts";
import * as m0023 from "./20261123_0023_sandbox_specs.ts";
import * as m0030 from "./20261123_0030_users_secrets_settings.ts";
import * as m0031 from "./20261123_0031_session_key_hash.ts";
import * as m0040 from "./20261123_0040_git_providers.ts";
import * as m0050 from "./20261123_0050_tenancy.ts";
import * as m0060 from "./20261123_0060_openhands_v1.ts";
import * as m0070 from "./20261123_0070_sandbox_engines.ts";
import * as m0080 from "./20261123_0080_change_notifications.ts";
import * as m0085 from "./20261123_0085_webhooks.ts";
import * as m0090 from "./20261123_0090_sealed_session_keys.ts";
import * as m0091 from "./20261123_0091_plaintext_session_key_idx.ts";
import * as m0100 from "./20261127_0100_confirmation_mode.ts";
import * as m0110 from "./20261127_0110_user_mcp_config.ts";
import * as m0210 from "./20261128_0210_agent_server_conversations.ts";
import * as m0220 from "./20261128_0220_bash_events.ts";
import * as m0230 from "./20261128_0230_sandbox_starts.ts";
import * as m0300 from "./20261128_0300_warm_claim.ts";
import * as m0320 from "./20261128_0320_repo_snapshots.ts";
import * as m0340 from "./20261128_0340_warm_claim_function.ts";
import * as m0350 from "./20261128_0350_snapshot_source.ts";
import * as m0400 from "./20261129_0400_requested_runs.ts";
import * as m0410 from "./20261129_0410_one_opening.ts";
import * as m0500 from "./20261205_0500_snapshot_stage_results.ts";
import * as m0510 from "./20261205_0510_sealed_client_agent.ts";
import * as m0620 from "./20261206_0620_bash_purge.ts";
import * as m0630 from "./20261206_0630_work_in_progress.ts";
import * as m0700 from "./20261206_0700_sandbox_spec_images.ts";
import * as m0710 from "./20261206_0710_user_reasoning.ts";

/** Append-only, ordered by name. Add a file, then list it here. */
export const migrations: Record<string, Migration> = {
  "20261122_0001_initial": m0001,
  "20261122_0003_setup_output": m0003,
  "20261122_0004_agent_runs": m0004,
  "20261123_0005_sandbox_refs": m0005,
  "20261123_0020_sandbox_owner": m0020,
  "20261123_0021_conversation_hooks": m0021,
  "20261123_0022_deployment_secrets": m0022,
  "20261123_0023_sandbox_specs": m0023,
  "20261123_0030_users_secrets_settings": m0030,
  "20261123_0031_session_key_hash": m0031,
  "20261123_0040_git_providers": m0040,
  "20261123_0050_tenancy": m0050,
  "20261123_0060_openhands_v1": m0060,
  "20261123_0070_sandbox_engines": m0070,
  "20261123_0080_change_notifications": m0080,
  "20261123_0085_webhooks": m0085,
  "20261123_0090_sealed_session_keys": m0090,
  "20261123_0091_plaintext_session_key_idx": m0091,
  "20261127_0100_confirmation_mode": m0100,
  "20261127_0110_user_mcp_config": m0110,
  "20261128_0210_agent_server_conversations": m0210,
  "20261128_0220_bash_events": m0220,
  "20261128_0230_sandbox_starts": m0230,
  "20261128_0300_warm_claim": m0300,
  "20261128_0320_repo_snapshots": m0320,
  "20261128_0340_warm_claim_function": m0340,
  "20261128_0350_snapshot_source": m0350,
  "20261129_0400_requested_runs": m0400,
  "20261129_0410_one_opening": m0410,
  "20261205_0500_snapshot_stage_results": m0500,
  "20261205_0510_sealed_client_agent": m0510,
  "20261206_0620_bash_purge": m0620,
  "20261206_0630_work_in_progress": m0630,
  "20261206_0700_sandbox_spec_images": m0700,
  "20261206_0710_user_reasoning": m0710,
};
