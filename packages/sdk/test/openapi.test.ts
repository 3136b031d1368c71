import { readFile } from "node:fs/promises";
import type {
  ExecutionStatus as CoreExecutionStatus,
  GitProvider as CoreGitProvider,
  SandboxStatus as CoreSandboxStatus,
  StartTaskStatus as CoreStartTaskStatus,
} from "@tern/core";
import { describe, expect, expectTypeOf, it } from "vitest";
import { generatedTypesPath, renderOpenApiTypes } from "../scripts/openapi-types.ts";
import type { ExecutionStatus, GitProvider, SandboxStatus, StartTaskStatus } from "../src/index.ts";

describe("the SDK's generated types", () => {
  it("are up to date with the API's OpenAPI document (else: pnpm --filter @tern/sdk generate)", async () => {
    const committed = await readFile(generatedTypesPath, "utf8");
    expect(committed, "src/openapi.ts is out of date with the API").toBe(await renderOpenApiTypes());
  });

  it("carry core's status lists, not copies typed by hand (checked by the typecheck)", () => {
    expectTypeOf<StartTaskStatus>().toEqualTypeOf<CoreStartTaskStatus>();
    expectTypeOf<ExecutionStatus>().toEqualTypeOf<CoreExecutionStatus>();
    expectTypeOf<SandboxStatus>().toEqualTypeOf<CoreSandboxStatus>();
    expectTypeOf<GitProvider>().toEqualTypeOf<CoreGitProvider>();
  });
});
