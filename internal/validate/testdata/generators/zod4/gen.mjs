// zod 4's own JSON Schema output for the fixture models: its default
// target (2020-12) and target "draft-7". Run by ../regen.sh.
import { readFileSync } from "node:fs";
import * as z from "zod";
import { models } from "./models.mjs";

const version = JSON.parse(readFileSync(new URL("./node_modules/zod/package.json", import.meta.url))).version;
const m = models(z, (s, id) => s.meta({ id }));
const out = { generator: "zod " + version, schemas: {} };
for (const [name, schema] of Object.entries(m)) {
  out.schemas[name] = z.toJSONSchema(schema);
  out.schemas[name + "-draft7"] = z.toJSONSchema(schema, { target: "draft-7" });
}
process.stdout.write(JSON.stringify(out, null, 2) + "\n");
