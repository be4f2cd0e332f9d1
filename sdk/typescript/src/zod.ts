import { z } from "zod";
import type { components } from "./schema.js";

/**
 * The Draft-07 JSON Schema of a zod schema, as chatd accepts it in a
 * response_format (no $schema, no $ref: recursive schemas are refused).
 */
export function schemaFromZod(schema: z.ZodType): Record<string, unknown> {
  const doc = z.toJSONSchema(schema, { target: "draft-7", reused: "inline", cycles: "throw" }) as Record<string, unknown>;
  delete doc["$schema"];
  return doc;
}

/** A json_schema response_format for a zod schema. */
export function responseFormat(name: string, schema: z.ZodType): components["schemas"]["ResponseFormat"] {
  return { type: "json_schema", json_schema: { name, schema: schemaFromZod(schema) } };
}
