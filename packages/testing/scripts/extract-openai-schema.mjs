// Writes src/strict/openai-chat-request.schema.json: the request schema of OpenAI's POST /chat/completions
// (CreateChatCompletionRequest) with every schema it refers to, from OpenAI's OpenAPI document
// (github openai/openai-openapi, openapi.json), trimmed of descriptions, examples and x- annotations.
//
//   node packages/testing/scripts/extract-openai-schema.mjs path/to/openapi.json <commit>
//   pnpm exec biome format --write packages/testing/src/strict/openai-chat-request.schema.json
import { readFileSync, writeFileSync } from "node:fs";

const [source, commit] = process.argv.slice(2);
if (!source || !commit) throw new Error("usage: extract-openai-schema.mjs openapi.json <commit>");
const doc = JSON.parse(readFileSync(source, "utf8"));
const schemas = doc.components.schemas;
const ROOT = "CreateChatCompletionRequest";

const DROPPED = new Set(["description", "example", "examples", "title", "deprecated"]);
/** Drops the annotations of a schema; `properties` and `$defs`-like maps keep their keys (names, not keywords). */
const trim = (node) => {
  if (Array.isArray(node)) return node.map(trim);
  if (!node || typeof node !== "object") return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k]) => !DROPPED.has(k) && !k.startsWith("x-"))
      .map(([k, v]) => [k, k === "properties" ? trimMap(v) : trim(v)]),
  );
};
const trimMap = (map) => Object.fromEntries(Object.entries(map).map(([k, v]) => [k, trim(v)]));

const wanted = new Set([ROOT]);
const walk = (node) => {
  if (Array.isArray(node)) return node.forEach(walk);
  if (!node || typeof node !== "object") return;
  if (typeof node.$ref === "string") {
    const name = node.$ref.split("/").at(-1);
    if (!wanted.has(name)) {
      wanted.add(name);
      walk(schemas[name]);
    }
  }
  for (const v of Object.values(node)) walk(v);
};
walk(schemas[ROOT]);

const out = {
  $comment: `OpenAI's POST /chat/completions request schema (${ROOT} and what it refers to), trimmed, from github openai/openai-openapi openapi.json at commit ${commit} (OpenAPI ${doc.openapi}, API ${doc.info.version}). Regenerate with packages/testing/scripts/extract-openai-schema.mjs.`,
  $ref: `#/components/schemas/${ROOT}`,
  components: { schemas: Object.fromEntries([...wanted].sort().map((name) => [name, trim(schemas[name])])) },
};
writeFileSync(new URL("../src/strict/openai-chat-request.schema.json", import.meta.url), `${JSON.stringify(out)}\n`);
console.log(`${wanted.size} schemas`);
