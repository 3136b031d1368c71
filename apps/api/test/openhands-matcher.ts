/**
 * Our answers against OpenHands' pydantic models, as the fixture extractors describe them
 * (fixtures/openhands/extract_models.py, extract_agent_server.py): every field of theirs is in
 * ours, of their type, null only where theirs may be, and within their enum. Shared by the app
 * server's fixture test and the agent server's contract test.
 */
export interface FieldType {
  kind: "string" | "integer" | "number" | "boolean" | "array" | "object" | "any" | "union";
  nullable: boolean;
  required?: boolean;
  enum?: unknown[];
  model?: string;
  items?: FieldType;
  options?: FieldType[];
  annotation?: string;
}

export type Models = Record<string, { fields: Record<string, FieldType> }>;

const kindOf = (v: unknown): string => {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
};

const fits = (t: FieldType, v: unknown): boolean => {
  switch (t.kind) {
    case "any":
      return true;
    case "union":
      return (t.options ?? []).some((o) => fits(o, v));
    case "number":
      return typeof v === "number";
    default:
      return kindOf(v) === t.kind;
  }
};

/** The matcher of one fixture's models: each difference one line, named by the model's field. */
export const modelMatcher = (models: Models) => {
  /** Every difference of `value` from OpenHands' `model`. */
  const differences = (model: string, value: unknown, path = model): string[] => {
    const spec = models[model];
    if (!spec) return [`${path}: no model ${model} in the fixture`];
    if (kindOf(value) !== "object") return [`${path}: ${kindOf(value)}, not an object`];
    const record = value as Record<string, unknown>;
    const out: string[] = [];
    for (const [name, t] of Object.entries(spec.fields)) {
      out.push(...fieldDifferences(t, record[name], `${path}.${name}`, name in record));
    }
    return out;
  };

  const fieldDifferences = (t: FieldType, v: unknown, path: string, present = true): string[] => {
    if (!present) return [`${path}: missing`];
    if (v === null)
      return t.nullable ? [] : [`${path}: null, but OpenHands' ${t.annotation ?? t.kind} is not nullable`];
    if (!fits(t, v)) return [`${path}: ${kindOf(v)}, not ${t.annotation ?? t.kind}`];
    if (t.enum && !t.enum.includes(v)) return [`${path}: ${JSON.stringify(v)} is not one of ${JSON.stringify(t.enum)}`];
    if (t.kind === "array" && t.items) {
      return (v as unknown[]).flatMap((item, i) => fieldDifferences(t.items!, item, `${path}[${i}]`));
    }
    if (t.kind === "object" && t.model && models[t.model]) return differences(t.model, v);
    return [];
  };

  return { differences, fieldDifferences };
};
