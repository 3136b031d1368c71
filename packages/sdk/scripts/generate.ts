import { writeFile } from "node:fs/promises";
import { generatedTypesPath, renderOpenApiTypes } from "./openapi-types.ts";

await writeFile(generatedTypesPath, await renderOpenApiTypes());
process.stdout.write(`wrote ${generatedTypesPath}\n`);
