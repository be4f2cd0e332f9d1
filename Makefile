SHELL := bash
export GOFLAGS := -buildvcs=false

# The test command CI runs (.ci/run) and the README shows. The timeout is per
# package: internal/crashtest takes 2–9 minutes alone and over 12 on a loaded machine.
TEST_FLAGS ?= -race -count=1 -timeout 25m

.PHONY: js-deps py-deps generate-sdk all build run mockllm test test-flaky test-short test-failover bench bench-all fuzz crash-long generate check-generated vet lint check-size pg-deps pgbouncer-deps failover-deps mcp-deps oidc-deps clean

all: build

# The commit `chatd version` reports (the build has no VCS stamp: -buildvcs=false).
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)

# Each build says what it builds first: the first one, on an empty build
# cache, compiles every dependency for minutes and would otherwise be
# silent; on a terminal, go build -v names each package as it compiles.
BUILD_V = $$([ -t 1 ] && echo -v)
build:
	@echo "building bin/chatd (the first build takes ~5 min on 2 cores; later builds take seconds)"
	@go build $(BUILD_V) -ldflags '-X github.com/chatd/chatd/internal/cli.commit=$(COMMIT)' -o bin/chatd ./cmd/server
	@echo "building bin/mockllm"
	@go build $(BUILD_V) -o bin/mockllm ./cmd/mockllm

## run: the server with its own local PostgreSQL, the example config (models
## served by mockllm on 127.0.0.1:9999) and structured output enabled; text
## logs at info, the per-request access lines at debug (shown with
## RUN_FLAGS='--log-level debug'). RUN_FLAGS adds flags.
RUN_FLAGS ?=
run: build
	bin/chatd server --config examples/chatd.json --experiments chat-structured-output --log-format text \
	  --access-log-level debug $(RUN_FLAGS)

## mockllm: the local scriptable LLM the example config points at, with the
## rules of examples/mockllm.json (docs/mockllm.md). MOCKLLM_FLAGS adds flags,
## e.g. make mockllm MOCKLLM_FLAGS='--mode invalid'.
MOCKLLM_FLAGS ?=
mockllm: build
	bin/mockllm --script examples/mockllm.json $(MOCKLLM_FLAGS)

## test: everything, against real PostgreSQL (each package starts its own),
## with node (the TypeScript SDK, the OpenAPI lint and type checks), Python
## (the Python SDK's tests, wheel and type checks, in virtual environments),
## chromium (the browser test), PgBouncer (internal/pgbouncertest),
## pg_auto_failover (the failover tests of internal/crashtest) and the
## modules of the OpenID provider the identity tests start, installed first
## when missing.
test: pg-deps pgbouncer-deps failover-deps mcp-deps js-deps py-deps oidc-deps
	go test $(TEST_FLAGS) ./...
	@# Allocation bounds and timings cannot be measured under -race: run those tests without it.
	go test -count=1 -run '^(TestFastPathAllocatesNothingExtra|TestEstimatorBoundsAllocation|TestRealisticValuesAccepted)$$' ./internal/jsonb/ ./internal/validate/

## test-flaky: each package's tests FLAKY_COUNT (20) times under -race
## while a busy loop per core loads the machine, to make a flaky test fail
## here rather than once in CI. PKG (default ./...) and RUN narrow it, e.g.
## make test-flaky PKG=./internal/runner/ RUN=TestMCP.
FLAKY_COUNT ?= 20
PKG ?= ./...
RUN ?= .
test-flaky: pg-deps pgbouncer-deps mcp-deps
	@burners=(); for _ in $$(seq $$(nproc)); do (while :; do :; done) & burners+=($$!); done; \
	  trap 'kill $${burners[*]}' EXIT; \
	  go test -race -count=$(FLAKY_COUNT) -run '$(RUN)' -timeout 90m $(PKG)

## bench: the end-to-end benchmark (a throwaway PostgreSQL, chatd, mockllm,
## N concurrent structured turns, pgbench for the database's ceiling; see
## docs/benchmarks.md), then the validator and codec micro-benchmarks.
## BENCH_FLAGS go to chatd-bench, e.g. BENCH_FLAGS='--clients 16 --rounds 5'.
BENCH_FLAGS ?=
bench: build pg-deps
	go build -o bin/chatd-bench ./cmd/chatd-bench
	bin/chatd-bench $(BENCH_FLAGS)
	go test -run '^$$' -bench '^Benchmark(Compile|Validate|Decode|Refusal)$$' -benchmem ./internal/validate/
	go test -run '^$$' -bench . -benchmem ./internal/jsonb/

## bench-all: every benchmark of every package (slow: the validator's
## adversarial families alone take minutes).
bench-all:
	go test -run '^$$' -bench . -benchmem ./...

## fuzz: short fuzz runs (seconds each) of the message codec, of the
## validator's scanner and schema admission, of the partial-object parser
## and of the Gemini schema form. CI runs it. Each target has an execution budget (about 5 s here),
## not a duration: go1.26's fuzz coordinator can fail a duration run with a
## bare "context deadline exceeded" at its end (golang/go#75804, fixed in
## 1.27). FUZZTIME=60s (or 1000000x) overrides every target's budget.
FUZZTIME ?=
fuzz1 = go test -run '^$$' -fuzz '^$(1)$$' -fuzztime $(or $(FUZZTIME),$(2)) -fuzzminimizetime 1s $(3)
fuzz:
	$(call fuzz1,FuzzScanRaw,5000x,./internal/jsonb/)
	$(call fuzz1,FuzzRoundTrip,1500x,./internal/jsonb/)
	$(call fuzz1,FuzzStorable,3000x,./internal/jsonb/)
	$(call fuzz1,FuzzNumberRules,10000x,./internal/jsonb/)
	$(call fuzz1,FuzzDecode,50000x,./internal/validate/)
	$(call fuzz1,FuzzCompile,12000x,./internal/validate/)
	$(call fuzz1,FuzzParse,50000x,./internal/partialjson/)
	$(call fuzz1,FuzzGeminiSchema,20000x,./internal/provider/)

## test-failover: the database failover tests alone (internal/crashtest:
## a synchronous standby promoted after the primary is killed or stopped,
## pg_auto_failover promoting by itself, an asynchronous standby's losses;
## docs/operations.md#database-failover). make test runs them too.
test-failover: pg-deps failover-deps
	go test $(TEST_FLAGS) -v -run '^TestFailover' ./internal/crashtest/

## crash-long: the SIGKILL crash test with many kill points, a longer
## concurrency storm, a longer hostile-model storm and a bigger deletion
## storm (internal/crashtest). CRASH_KILLS, STORM_OPS, HOSTILE_KILLS,
## DELETE_STORM_CHATS, DELETE_STORM_KILLS and CRASH_SEED shape it; the
## seed is printed, and CRASH_SEED=N replays a run.
CRASH_KILLS ?= 500
STORM_OPS ?= 200
HOSTILE_KILLS ?= 200
DELETE_STORM_CHATS ?= 200
DELETE_STORM_KILLS ?= 20
CRASH_SEED ?=
crash-long: pg-deps
	CHATD_CRASH_KILLS=$(CRASH_KILLS) CHATD_STORM_OPS=$(STORM_OPS) CHATD_HOSTILE_KILLS=$(HOSTILE_KILLS) CHATD_CRASH_SEED=$(CRASH_SEED) \
	  CHATD_DELETE_STORM_CHATS=$(DELETE_STORM_CHATS) CHATD_DELETE_STORM_KILLS=$(DELETE_STORM_KILLS) \
	  go test -race -count=1 -timeout 4h -v -run '^(TestKillRestart|TestStorm|TestHostileModelStorm|TestDeleteStorm)$$' ./internal/crashtest/

## generate: sqlc's code (internal/dbgen), sql/schema.sql, the pg_dump
## of a migrated database (sql/dump_test.go), and docs/flags.md, the flag
## reference (cmd/server/flagdoc_test.go).
generate: pg-deps
	go tool sqlc generate
	CHATD_SCHEMA_DUMP=write go test -count=1 -run '^TestSchemaDump$$' ./sql/
	CHATD_FLAG_DOC=write go test -count=1 -run '^TestFlagReference$$' ./cmd/server/

## check-generated: fails when the committed sqlc output, sql/schema.sql or
## docs/flags.md is stale, or when sqlc vet's rules (sqlc.yaml) refuse a query.
check-generated: pg-deps
	go tool sqlc diff
	go tool sqlc vet
	go test -count=1 -run '^TestSchemaDump$$' ./sql/
	go test -count=1 -run '^TestFlagReference$$' ./cmd/server/

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	go vet ./...

## lint: golangci-lint v2 with .golangci.yml (the layering rules among
## them). It is pinned in tools/lint/go.mod, a module of its own, so that its
## dependencies stay out of chatd's go.mod.
lint: vet
	go tool -modfile=tools/lint/go.mod golangci-lint run ./...

## check-size: non-test functions over 80 lines (golangci-lint's funlen,
## also part of lint). A table says so with //nolint:funlen and its reason.
check-size:
	go tool -modfile=tools/lint/go.mod golangci-lint run --enable-only funlen ./...

## js-deps: node and npm (Debian's, when missing) and the SDKs' npm packages,
## pinned by sdk/typescript/package-lock.json and sdk/ai-sdk/package-lock.json
## (npm ci builds each: its prepare script; the AI SDK adapter links the
## SDK, so the SDK comes first); Debian's chromium for the headless browser
## tests (internal/jstest).
js-deps:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
	  { echo "installing node and npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	@command -v chromium >/dev/null 2>&1 || \
	  { echo "installing chromium"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@cd sdk/typescript && { [ node_modules/.package-lock.json -nt package-lock.json ] && [ -f dist/src/index.js ] || npm ci --no-audit --no-fund --loglevel=error; }
	@cd sdk/ai-sdk && { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; }

## oidc-deps: the modules of tools/oidcprovider, zitadel/oidc's example
## OpenID provider, which the identity tests build and start
## (internal/oidctest); a module of its own, out of chatd's go.mod.
oidc-deps:
	go -C tools/oidcprovider mod download

## generate-sdk: the TypeScript SDK's copy of the OpenAPI document and its
## generated types, and the Python SDK's Pydantic models (CI fails when they
## drift: internal/jstest, internal/pytest).
generate-sdk: py-deps
	go run ./cmd/server openapi > sdk/typescript/openapi.json
	cd sdk/typescript && node_modules/.bin/openapi-typescript openapi.json -o src/schema.ts
	$(PY_VENV)/bin/python sdk/python/scripts/generate.py sdk/typescript/openapi.json -o sdk/python/src/chatd/types.py

## py-deps: python3 with venv (Debian's, when missing) and the Python SDK's
## virtual environment, sdk/python/.venv, with the tools and libraries pinned
## by sdk/python/requirements-dev.txt from PyPI (pytest, pyright,
## datamodel-code-generator, build, hatchling, httpx, pydantic), remade when
## that file changes.
PY_VENV := sdk/python/.venv
PY_REQ := sdk/python/requirements-dev.txt
py-deps:
	@command -v python3 >/dev/null 2>&1 && python3 -c 'import venv, ensurepip' 2>/dev/null || \
	  { echo "installing python3 and venv"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null; }
	@test "$$(cat $(PY_VENV)/.chatd-req-sha256 2>/dev/null)" = "$$(sha256sum < $(PY_REQ) | cut -d' ' -f1)" || \
	  { echo "installing $(PY_REQ) into $(PY_VENV)"; rm -rf $(PY_VENV) && python3 -m venv $(PY_VENV) && \
	    $(PY_VENV)/bin/pip install -q --disable-pip-version-check -r $(PY_REQ) && \
	    sha256sum < $(PY_REQ) | cut -d' ' -f1 | tr -d '\n' > $(PY_VENV)/.chatd-req-sha256; }

pg-deps:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
	  { echo "installing PostgreSQL server binaries"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

## pgbouncer-deps: Debian's PgBouncer (1.18 on bookworm), which
## internal/pgbouncertest runs in front of its throwaway cluster. Debian
## installs it in /usr/sbin; the package's own service is not used.
pgbouncer-deps:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || \
	  { echo "installing pgbouncer"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }

## failover-deps: Debian's pg_auto_failover for the PostgreSQL the tests
## run (pg_autoctl; the package's own service is not used).
PG_MAJOR = $(shell ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sed 's|/usr/lib/postgresql/||; s|/bin||' | sort -n | tail -1)
failover-deps: pg-deps
	@command -v pg_autoctl >/dev/null 2>&1 || \
	  { echo "installing pg_auto_failover"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-$(or $(PG_MAJOR),15)-auto-failover >/dev/null; }

## mcp-deps: node and npm (Debian's, when missing) and the pinned MCP servers
## the tests run (internal/mcp/testdata/npm, from its committed lockfile).
MCP_NPM := internal/mcp/testdata/npm
mcp-deps:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
	  { echo "installing node and npm"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	@test "$$(cat $(MCP_NPM)/node_modules/.chatd-lock-sha256 2>/dev/null)" = "$$(sha256sum < $(MCP_NPM)/package-lock.json | cut -d' ' -f1)" || \
	  { cd $(MCP_NPM) && npm ci --no-audit --no-fund --loglevel=error && sha256sum < package-lock.json | cut -d' ' -f1 | tr -d '\n' > node_modules/.chatd-lock-sha256; }

clean:
	rm -rf bin
