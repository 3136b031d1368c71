import { ValidationError } from "@tern/core";
import type { z } from "zod";

interface ValidationResult {
  success: boolean;
  error?: z.ZodError;
  target: string;
}

const fieldOf = (issue: z.core.$ZodIssue): string => (issue.path.length ? issue.path.join(".") : "(body)");

/**
 * The OpenAPIHono defaultHook: a request that fails its schema becomes one 422 naming the field,
 * with every problem in `details`.
 */
export const validationHook = (result: ValidationResult): void => {
  if (result.success || !result.error) return;
  const issues = result.error.issues;
  const details = issues.map((i) => ({ field: fieldOf(i), in: result.target, message: i.message }));
  const first = details[0];
  throw new ValidationError(first ? `${first.field}: ${first.message}` : "The request is not valid", details);
};
