/**
 * Every operation of the API's own OpenAPI document, for the security suite: the tenancy matrix
 * and the input fuzz walk these, so a route added later is covered without touching the tests.
 */

type Schema = Record<string, unknown>;

interface Parameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema?: Schema;
}

export interface Operation {
  method: string;
  /** The template, e.g. `/api/keys/{id}`. */
  path: string;
  parameters: Parameter[];
  /** The JSON body's schema, `$ref`s resolved lazily by `sampleOf`. */
  body?: Schema;
}

export interface OpenApiDocument {
  paths: Record<
    string,
    Record<string, { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: Schema }> } }>
  >;
  components?: { schemas?: Record<string, Schema> };
}

const METHODS = ["get", "post", "put", "patch", "delete"];

export const operationsOf = (doc: OpenApiDocument): Operation[] =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        body: op.requestBody?.content?.["application/json"]?.schema,
      })),
  );

/** A lone surrogate (which no URL can carry: encodeURIComponent throws) as U+FFFD, as URLSearchParams does. */
const wellFormed = (s: string) =>
  s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

/** The path with each `{param}` replaced, values URL-encoded. */
export const fillPath = (template: string, values: Record<string, string>): string =>
  template.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(wellFormed(values[name] ?? "x")));

const resolve = (doc: OpenApiDocument, s: Schema): Schema => {
  const ref = s.$ref;
  if (typeof ref !== "string") return s;
  const name = ref.replace("#/components/schemas/", "");
  return resolve(doc, doc.components?.schemas?.[name] ?? {});
};

/**
 * A small valid instance of a JSON schema (as zod writes them): required properties only, first
 * enum value, shortest strings. Enough for a request to pass validation and reach its handler.
 */
export const sampleOf = (doc: OpenApiDocument, schema: Schema, depth = 0): unknown => {
  const s = resolve(doc, schema);
  if (depth > 8) return null;
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  for (const k of ["anyOf", "oneOf", "allOf"] as const) {
    const options = s[k];
    if (Array.isArray(options) && options.length > 0) return sampleOf(doc, options[0] as Schema, depth + 1);
  }
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  switch (type) {
    case "object": {
      const props = (s.properties ?? {}) as Record<string, Schema>;
      const required = (s.required ?? []) as string[];
      return Object.fromEntries(required.map((k) => [k, sampleOf(doc, props[k] ?? {}, depth + 1)]));
    }
    case "array":
      return Array.from({ length: Number(s.minItems ?? 0) }, () => sampleOf(doc, (s.items ?? {}) as Schema, depth + 1));
    case "string":
      if (s.format === "date-time") return new Date(Date.now() + 86_400_000).toISOString();
      return "x".repeat(Math.max(1, Number(s.minLength ?? 1)));
    case "integer":
    case "number":
      return Number(s.minimum ?? 1);
    case "boolean":
      return false;
    default:
      return null;
  }
};

/**
 * The answer's text. A streamed start (POST …/stream-start) streams until its task is READY or
 * ERROR, which needs a worker: its first snapshot is read, then the stream is cancelled.
 */
export const answerText = async (op: Operation, res: Response): Promise<string> => {
  if (!op.path.endsWith("/stream-start") || res.status !== 200 || !res.body) return res.text();
  const reader = res.body.getReader();
  const { value } = await reader.read();
  await reader.cancel();
  return `${new TextDecoder().decode(value)}]`;
};
