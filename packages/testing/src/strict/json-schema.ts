/**
 * A small JSON Schema checker for the strict scripted LLM servers: the keywords the providers' request
 * schemas use (OpenAPI 3.1 with 3.0's `nullable`), and the first error found with its path, so each
 * server can word it as its provider does. Formats and descriptions are not checked.
 */

export type JsonSchema = { [key: string]: unknown };
export type JsonPath = (string | number)[];

export type SchemaError =
  | { path: JsonPath; kind: "missing" }
  | { path: JsonPath; kind: "type"; expected: string[]; got: unknown }
  | { path: JsonPath; kind: "enum"; allowed: unknown[]; got: unknown; tag?: string }
  | { path: JsonPath; kind: "extra" }
  | { path: JsonPath; kind: "minItems" | "maxItems" | "minLength" | "maxLength"; limit: number; got: unknown }
  | { path: JsonPath; kind: "minimum" | "maximum"; limit: number; got: number }
  | { path: JsonPath; kind: "pattern"; pattern: string; got: string };

export interface CheckOptions {
  /**
   * Objects with `properties` and no `additionalProperties` refuse other keys (both providers refuse
   * parameters they do not know, though the documents leave their objects open).
   */
  closed: boolean;
}

interface Ctx extends CheckOptions {
  root: JsonSchema;
}

/** Resolves a local `$ref` (`#/components/schemas/X`, `#/$defs/X`) against the root document. */
const resolve = (root: JsonSchema, ref: string): JsonSchema => {
  if (!ref.startsWith("#/")) throw new Error(`only local $ref: ${ref}`);
  let node: unknown = root;
  for (const part of ref.slice(2).split("/")) {
    node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  if (!node || typeof node !== "object") throw new Error(`$ref not found: ${ref}`);
  return node as JsonSchema;
};

const typeOf = (v: unknown): string => {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
};

const hasType = (v: unknown, t: string): boolean => {
  const actual = typeOf(v);
  return actual === t || (t === "number" && actual === "integer");
};

/** The property names an object schema declares, through `$ref`s and `allOf`s. */
const declaredKeys = (s: JsonSchema, ctx: Ctx, into = new Set<string>()): Set<string> => {
  if (typeof s.$ref === "string") declaredKeys(resolve(ctx.root, s.$ref), ctx, into);
  if (s.properties && typeof s.properties === "object") for (const k of Object.keys(s.properties)) into.add(k);
  if (Array.isArray(s.allOf)) for (const part of s.allOf as JsonSchema[]) declaredKeys(part, ctx, into);
  return into;
};

/** The deeper error wins (the branch that got furthest); at equal depth, any but a type error. */
const better = (a: SchemaError, b: SchemaError): SchemaError => {
  if (a.path.length !== b.path.length) return a.path.length > b.path.length ? a : b;
  if (a.kind === "type" && b.kind !== "type") return b;
  return a;
};

/** The branch a discriminated union picks by its tag property, or an error naming the tags allowed. */
const byDiscriminator = (
  branches: JsonSchema[],
  prop: string,
  value: Record<string, unknown>,
  path: JsonPath,
  ctx: Ctx,
): { branch: JsonSchema } | { error: SchemaError } | null => {
  const tag = value[prop];
  const allowed: unknown[] = [];
  for (const b of branches) {
    const target = typeof b.$ref === "string" ? resolve(ctx.root, b.$ref) : b;
    const p = (target.properties as Record<string, JsonSchema> | undefined)?.[prop];
    const tags = Array.isArray(p?.enum) ? p.enum : p && "const" in p ? [p.const] : null;
    if (!tags) return null;
    if (tags.includes(tag)) return { branch: b };
    allowed.push(...tags);
  }
  if (tag === undefined) return { error: { path: [...path, prop], kind: "missing" } };
  return { error: { path: [...path, prop], kind: "enum", allowed, got: tag, tag: prop } };
};

const checkUnion = (
  branches: JsonSchema[],
  s: JsonSchema,
  value: unknown,
  path: JsonPath,
  ctx: Ctx,
): SchemaError | null => {
  const discriminator = (s.discriminator as { propertyName?: string } | undefined)?.propertyName;
  if (discriminator && typeOf(value) === "object") {
    const picked = byDiscriminator(branches, discriminator, value as Record<string, unknown>, path, ctx);
    if (picked && "error" in picked) return picked.error;
    if (picked) return check(picked.branch, value, path, ctx);
  }
  let best: SchemaError | null = null;
  const typeErrors: string[] = [];
  for (const b of branches) {
    const e = check(b, value, path, ctx);
    if (!e) return null;
    if (e.kind === "type" && e.path.length === path.length) typeErrors.push(...e.expected);
    best = best ? better(best, e) : e;
  }
  // No branch took the value's type at all: say every type that would have done.
  if (best?.kind === "type" && best.path.length === path.length) return { ...best, expected: [...new Set(typeErrors)] };
  return best;
};

const checkObject = (
  s: JsonSchema,
  value: Record<string, unknown>,
  path: JsonPath,
  ctx: Ctx,
  open: boolean,
): SchemaError | null => {
  const props = (s.properties ?? {}) as Record<string, JsonSchema>;
  // The keys present first: a wrong tag (`type`) says more than the fields its union branch lacks.
  for (const [key, v] of Object.entries(value)) {
    const p = props[key];
    if (p) {
      const e = check(p, v, [...path, key], ctx);
      if (e) return e;
    } else if (s.additionalProperties === false) {
      return { path: [...path, key], kind: "extra" };
    } else if (s.additionalProperties && typeof s.additionalProperties === "object") {
      const e = check(s.additionalProperties as JsonSchema, v, [...path, key], ctx);
      if (e) return e;
    } else if (ctx.closed && !open && s.properties && s.additionalProperties === undefined) {
      return { path: [...path, key], kind: "extra" };
    }
  }
  for (const key of (s.required ?? []) as string[]) {
    if (value[key] === undefined) return { path: [...path, key], kind: "missing" };
  }
  return null;
};

const checkScalar = (s: JsonSchema, value: unknown, path: JsonPath): SchemaError | null => {
  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum)
      return { path, kind: "minimum", limit: s.minimum, got: value };
    if (typeof s.maximum === "number" && value > s.maximum)
      return { path, kind: "maximum", limit: s.maximum, got: value };
  }
  if (typeof value === "string") {
    if (typeof s.minLength === "number" && value.length < s.minLength)
      return { path, kind: "minLength", limit: s.minLength, got: value };
    if (typeof s.maxLength === "number" && value.length > s.maxLength)
      return { path, kind: "maxLength", limit: s.maxLength, got: value };
    if (typeof s.pattern === "string" && !new RegExp(s.pattern, "u").test(value))
      return { path, kind: "pattern", pattern: s.pattern, got: value };
  }
  if (Array.isArray(value)) {
    if (typeof s.minItems === "number" && value.length < s.minItems)
      return { path, kind: "minItems", limit: s.minItems, got: value };
    if (typeof s.maxItems === "number" && value.length > s.maxItems)
      return { path, kind: "maxItems", limit: s.maxItems, got: value };
  }
  return null;
};

/** `open`: this object is one part of an `allOf`, whose whole checks the keys. */
const check = (s: JsonSchema, value: unknown, path: JsonPath, ctx: Ctx, open = false): SchemaError | null => {
  if (value === null && s.nullable === true) return null;
  if (typeof s.$ref === "string") {
    const e = check(resolve(ctx.root, s.$ref), value, path, ctx, open);
    if (e) return e;
  }
  if (Array.isArray(s.allOf)) {
    for (const part of s.allOf as JsonSchema[]) {
      const e = check(part, value, path, ctx, true);
      if (e) return e;
    }
    if (ctx.closed && !open && typeOf(value) === "object") {
      const keys = declaredKeys(s, ctx);
      const extra = Object.keys(value as object).find((k) => !keys.has(k));
      if (extra !== undefined) return { path: [...path, extra], kind: "extra" };
    }
  }
  for (const union of ["anyOf", "oneOf"] as const) {
    if (Array.isArray(s[union])) {
      const e = checkUnion(s[union] as JsonSchema[], s, value, path, ctx);
      if (e) return e;
    }
  }
  if (s.type !== undefined) {
    const types = (Array.isArray(s.type) ? s.type : [s.type]) as string[];
    if (!types.some((t) => hasType(value, t))) return { path, kind: "type", expected: types, got: value };
  }
  if (Array.isArray(s.enum) && !s.enum.includes(value)) return { path, kind: "enum", allowed: s.enum, got: value };
  if ("const" in s && s.const !== value) return { path, kind: "enum", allowed: [s.const], got: value };
  if (typeOf(value) === "object" && (s.properties || s.required || s.additionalProperties !== undefined)) {
    const e = checkObject(s, value as Record<string, unknown>, path, ctx, open);
    if (e) return e;
  }
  if (Array.isArray(value) && s.items && typeof s.items === "object") {
    for (let i = 0; i < value.length; i++) {
      const e = check(s.items as JsonSchema, value[i], [...path, i], ctx);
      if (e) return e;
    }
  }
  return checkScalar(s, value, path);
};

/** The first way `value` breaks `schema` (a `$ref` into `root`, or a schema of its own), or null. */
export const checkSchema = (
  schema: JsonSchema,
  value: unknown,
  root: JsonSchema,
  opts: CheckOptions = { closed: false },
): SchemaError | null => check(schema, value, [], { ...opts, root });
