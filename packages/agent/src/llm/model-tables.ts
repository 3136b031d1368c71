/**
 * A model's entry in tables keyed by model name (prices, context windows), the first table first:
 * its exact name, else the longest key it extends with a dash (`gpt-4o-2024-08-06` takes `gpt-4o`).
 * A provider prefix (`openai/`, `anthropic/`) is ignored. Null when no table knows the model.
 */
export const lookUpModel = <T>(model: string, tables: readonly Readonly<Record<string, T>>[]): T | null => {
  const name = model.replace(/^(openai|anthropic)\//i, "");
  for (const table of tables) {
    if (table[name]) return table[name];
    const prefix = Object.keys(table)
      .filter((k) => name.startsWith(`${k}-`))
      .sort((a, b) => b.length - a.length)[0];
    if (prefix) return table[prefix] ?? null;
  }
  return null;
};
