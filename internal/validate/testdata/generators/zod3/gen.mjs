// zod-to-json-schema (zod 3) output for the fixture models, as most
// projects call it: with a name, which makes a root "$ref" into
// "definitions". Run by ../regen.sh.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { zodToJsonSchema } from "zod-to-json-schema";
import { models } from "../zod4/models.mjs";

const v = (p) => JSON.parse(readFileSync(new URL(`./node_modules/${p}/package.json`, import.meta.url))).version;
const m = models(z);
const out = { generator: `zod-to-json-schema ${v("zod-to-json-schema")} (zod ${v("zod")})`, schemas: {} };
for (const [name, schema] of Object.entries(m)) {
  out.schemas[name] = zodToJsonSchema(schema, name);
}
process.stdout.write(JSON.stringify(out, null, 2) + "\n");
