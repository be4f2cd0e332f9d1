#!/usr/bin/env bash
# Regenerates schemas/*.json: the JSON Schema that each real generator
# emits for the fixture models (the same three models written four times:
# pydantic/gen.py, zod4/models.mjs for zod 4 and zod 3, invopop/main.go).
# Needs python3 with Pydantic 2, node and npm (the npm registry), and Go
# (the module proxy). The outputs are committed; tests never run this.
set -euo pipefail
cd "$(dirname "$0")"
python3 -c 'import pydantic, sys; sys.exit(0 if pydantic.VERSION.startswith("2.") else "Pydantic 2 is required, found " + pydantic.VERSION)'
python3 pydantic/gen.py > schemas/pydantic.json
(cd zod4 && npm ci --no-audit --no-fund --silent && node gen.mjs) > schemas/zod4.json
(cd zod3 && npm ci --no-audit --no-fund --silent && node gen.mjs) > schemas/zod-to-json-schema.json
(cd invopop && GOFLAGS=-mod=mod go run .) > schemas/invopop.json
rm -rf zod4/node_modules zod3/node_modules
echo "regenerated: $(ls schemas)"
