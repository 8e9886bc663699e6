# mnv — make help lists the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# Every Go module of the workspace; `go test ./...` does not cross module boundaries.
MODULES := proto/gen services/platform services/accounts services/accounts/accountsclient services/verification services/connect services/connect/connectclient gateway cmd tests deploy/k8s
# Every module's packages as patterns for one go command from the root (go.work joins them).
PKGS := $(addsuffix /...,$(addprefix ./,$(MODULES)))
# e.g. GOLANGCI_FLAGS=--concurrency=1 on a busy machine.
GOLANGCI_FLAGS ?=
BIN := $(CURDIR)/bin
PG_ENSURE := deploy/local/pg-ensure.sh
REDIS_ENSURE := deploy/local/redis-ensure.sh
CHROMIUM_ENSURE := deploy/local/chromium-ensure.sh
# A count, not a duration: with -fuzztime as a duration, Go 1.26's fuzzing coordinator can fail a
# target with a bare "context deadline exceeded" at the deadline (golang/go#75804), which CI saw
# on FuzzOpen. 30000 executions take 1 to 12 s per target here.
FUZZTIME ?= 30000x
# The browser SDK (sdk/web) needs Node.js; its files are copied into the gateway, which embeds them.
SDK := sdk/web
SDK_ASSETS := gateway/internal/sdkassets/files
NODE_ENSURE := deploy/local/node-ensure.sh
# The console (console/: TypeScript, Preact, esbuild), built into the gateway, which embeds it.
CONSOLE := console
CONSOLE_DIST := gateway/internal/console/dist
# The reference webhook receiver of the tests (Node.js, the standardwebhooks npm library).
RECEIVER := tests/webhooks/receiver
# The browser tests' driver of Chromium (Node.js, the playwright-core npm library).
BROWSER_DRIVER := tests/harness/browser
# The CAMARA tests' relying party (Node.js, the openid-client npm library, a certified OIDC client).
OIDCCLIENT := tests/camara/oidcclient
# The SMPP tests' SMSC (Node.js, the smpp npm library, an SMPP implementation independent of ours).
SMSC := tests/smsc

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

.PHONY: run
run: build ## Start the whole suite (gateway on MNV_HTTP_ADDR, default 127.0.0.1:8080)
	@url=$$($(PG_ENSURE) --database mnv); DATABASE_URL="$$url" MNV_LOG_FORMAT=$${MNV_LOG_FORMAT:-console} exec $(BIN)/mnv

.PHONY: test
# One go test over every module's packages (go.work joins them), so a long package of one module
# (the end-to-end suite) runs beside the others' instead of after them. -vet=off: make lint runs
# go vet's analyzers (golangci-lint's govet) over every package already.
test: ## Run every test against a real PostgreSQL and Redis, and in Chromium (started or installed if need be); as many packages at once as the server's free connections allow (deploy/local/pg-test-budget.sh)
	@budget=$$(deploy/local/pg-test-budget.sh); read -r url testp <<<"$$budget"; export DATABASE_URL="$$url"; export MNV_BIN_DIR=$(BIN); \
	redis=$$($(REDIS_ENSURE)); export MNV_TEST_REDIS_URL="$$redis"; \
	chromium=$$($(CHROMIUM_ENSURE)); export MNV_CHROMIUM="$$chromium"; \
	$(MAKE) build; \
	$(MAKE) sdk-test; \
	$(MAKE) console-check; \
	$(MAKE) receiver-deps; \
	$(MAKE) browser-deps; \
	$(MAKE) oidcclient-deps; \
	$(MAKE) smsc-deps; \
	echo "== go test, every module, $$testp package(s) at a time"; \
	go test -count=1 -race -vet=off -p $$testp $(PKGS)

.PHONY: test-partitioned
# The services' store and money tests and the end-to-end money tests,
# with every tenant table rebuilt hash-partitioned by client_id after migrating: native
# partitioning refuses what Citus refuses (a key without client_id), so this proves on plain
# PostgreSQL that the schema and its statements distribute (docs/operations.md#past-one-postgresql).
# The packages whose tests run the stores' statements and the money paths over them.
PARTITIONED_PKGS := ./services/accounts/internal/store/... ./services/accounts/internal/billing/... \
	./services/verification/internal/store/... ./services/verification/internal/verify/... ./services/verification/internal/stuckplus/... \
	./services/verification/internal/workflows/... \
	./services/connect/internal/store/... ./services/connect/internal/profiles/... ./services/connect/internal/imports/...
PARTITIONED_E2E := TestChargeHeardLate|TestRestartsLoseNoMoney|TestReconcilerSkipsAPoisonedCharge|TestConcurrentVerifies|TestEnrichmentCharges
test-partitioned: build ## Run the store and money tests (services' and end-to-end) on tenant tables hash-partitioned by client_id
	@budget=$$(deploy/local/pg-test-budget.sh); read -r url testp <<<"$$budget"; export DATABASE_URL="$$url"; export MNV_BIN_DIR=$(BIN); \
	redis=$$($(REDIS_ENSURE)); export MNV_TEST_REDIS_URL="$$redis"; \
	export MNV_TEST_HASH_PARTITIONS=4; \
	echo "== go test (tenant tables hash-partitioned by client_id)"; \
	go test -count=1 -p $$testp $(PARTITIONED_PKGS); \
	(cd tests && go test -count=1 -run '^($(PARTITIONED_E2E))$$' ./e2e)

.PHONY: test-short
# Without -count=1: these tests reach no server, so go's test cache (keyed on the code, the files
# and the environment variables a test reads) may answer for an unchanged package.
# -vet=off: make lint runs go vet's analyzers (golangci-lint's govet) over every package
# already; the vet pass go test adds took 14 of 75 s here with a cold test cache.
test-short: ## Run the fast tier: go test -short on every module, no PostgreSQL, Redis, browser or built binary (< 1 min)
	go test -short -vet=off $(PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target briefly (FUZZTIME executions each, default 30000x)
	@for f in $$(grep -rlE '^func Fuzz' --include='*_test.go' $(MODULES)); do \
	  for t in $$(grep -oE '^func Fuzz[A-Za-z0-9_]+' $$f | sed 's/func //'); do \
	    echo "== fuzz $$t (./$$(dirname $$f))"; \
	    go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f); \
	  done; \
	done

.PHONY: bench
bench: build ## Measure throughput (REST vs gRPC, debits, verify, Connect, webhooks), CAMARA latency, usage and the console's first page, next to the raw Postgres limit
	@url=$$($(PG_ENSURE)); DATABASE_URL="$$url" MNV_BIN_DIR=$(BIN) go run ./tests/bench

.PHONY: screenshots
# The console's pages as a signed-in person sees them, from the browser test that walks every
# page against make run's suite (tests/browser, the STUCK_PLUS flow first: the reveal page lists
# its session). PostgreSQL and Chromium are found, or started and installed, as for make test;
# axe-core comes with the console's pinned npm packages.
SCREENSHOTS := $(CURDIR)/out/screenshots
screenshots: build $(CONSOLE)/node_modules/.package-lock.json $(BROWSER_DRIVER)/node_modules/.package-lock.json ## Write a PNG of every console page, signed in against make run's suite, to out/screenshots/
	@url=$$($(PG_ENSURE)); export DATABASE_URL="$$url"; export MNV_BIN_DIR=$(BIN); \
	chromium=$$($(CHROMIUM_ENSURE)); export MNV_CHROMIUM="$$chromium"; \
	rm -rf $(SCREENSHOTS); export MNV_SCREENSHOTS=$(SCREENSHOTS); \
	(cd tests && go test -count=1 -run '^TestBrowser$$/^(STUCK_PLUS|console)' ./browser/); \
	echo "== $$(ls $(SCREENSHOTS) | wc -l) screenshots in $(SCREENSHOTS)"; ls $(SCREENSHOTS)

.PHONY: build
build: ## Build the binaries into bin/
	@mkdir -p $(BIN)
	go build -o $(BIN)/mnv ./cmd/mnv
	go build -o $(BIN)/mnvctl ./cmd/mnvctl
	go build -o $(BIN)/accounts ./services/accounts/cmd/accounts
	go build -o $(BIN)/verification ./services/verification/cmd/verification
	go build -o $(BIN)/connect ./services/connect/cmd/connect
	go build -o $(BIN)/gateway ./gateway/cmd/gateway

$(BIN)/.tools: tools/go.mod tools/go.sum
	@mkdir -p $(BIN)
	GOWORK=off GOBIN=$(BIN) go -C tools install tool
	@touch $@

.PHONY: tools
tools: $(BIN)/.tools ## Build the pinned buf, protoc plugins and oapi-codegen into bin/

# golangci-lint has a module of its own: beside buf it would move both tools' shared
# dependencies off the versions each release was tested with, and make generate need not build it.
$(BIN)/.lint-tools: tools/lint/go.mod tools/lint/go.sum
	@mkdir -p $(BIN)
	GOWORK=off GOBIN=$(BIN) go -C tools/lint install tool
	@touch $@

.PHONY: generate
generate: tools ## Regenerate Go, gateway and OpenAPI code from proto/
	find proto/gen -name '*.pb.go' -o -name '*.pb.gw.go' -o -name '*.swagger.json' | xargs -r rm
	rm -f proto/gen/openapi/mnv.openapi.json proto/gen/openapi/routes.go
	$(BIN)/buf generate
	@# The OpenAPI plugin is ours: built now, from the code the first step wrote.
	go build -o $(BIN)/protoc-gen-mnv-openapi ./gateway/cmd/protoc-gen-mnv-openapi
	$(BIN)/buf generate --template buf.gen.openapi.yaml
	cd proto/gen && go mod tidy
	@# A Go client of the document by a mainstream generator, which tests/openapi walks the API with.
	$(BIN)/oapi-codegen -config tests/openapi/apiclient/oapi-codegen.yaml proto/gen/openapi/mnv.openapi.json
	@# The browser SDK's classic-script build, and the copies the gateway embeds.
	@$(NODE_ENSURE)
	node $(SDK)/scripts/build-global.mjs
	cp $(SDK)/src/mnv.js $(SDK)/src/mnv.d.ts $(SDK)/dist/mnv.global.js $(SDK_ASSETS)/
	@# The console: its API types from the document, then its bundle into the gateway's folder.
	@$(MAKE) $(CONSOLE)/node_modules/.package-lock.json
	node $(CONSOLE)/scripts/build.mjs

.PHONY: sdk-test
sdk-test: sdk-check ## Test the browser SDK (node --test) and check its types
	@$(NODE_ENSURE)
	cd $(SDK) && node --test test/

# npm ci only when the lock file changed since the last install, so the check runs offline.
$(SDK)/node_modules/.package-lock.json: $(SDK)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(SDK) --no-audit --no-fund --prefer-offline

.PHONY: sdk-check
sdk-check: $(SDK)/node_modules/.package-lock.json ## Type-check the browser SDK's declarations (pinned tsc)
	npx --prefix $(SDK) tsc --noEmit -p $(SDK)

# As for the SDK: npm ci only when the console's lock file changed since the last install.
$(CONSOLE)/node_modules/.package-lock.json: $(CONSOLE)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(CONSOLE) --no-audit --no-fund --prefer-offline

.PHONY: console-check
console-check: $(CONSOLE)/node_modules/.package-lock.json ## Type-check the console (pinned tsc, no emit) against the API's generated types
	npx --prefix $(CONSOLE) tsc --noEmit -p $(CONSOLE)

.PHONY: console
console: $(CONSOLE)/node_modules/.package-lock.json ## Rebuild the console alone (API types and bundle into the gateway); make generate does it too
	node $(CONSOLE)/scripts/build.mjs

# As for the SDK: npm ci only when the receiver's lock file changed since the last install.
$(RECEIVER)/node_modules/.package-lock.json: $(RECEIVER)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(RECEIVER) --no-audit --no-fund --prefer-offline

.PHONY: receiver-deps
receiver-deps: $(RECEIVER)/node_modules/.package-lock.json ## Install the webhook test receiver's pinned npm packages

# As for the receiver: npm ci only when the browser driver's lock file changed since the last install.
$(BROWSER_DRIVER)/node_modules/.package-lock.json: $(BROWSER_DRIVER)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(BROWSER_DRIVER) --no-audit --no-fund --prefer-offline

.PHONY: browser-deps
browser-deps: $(BROWSER_DRIVER)/node_modules/.package-lock.json ## Install the browser tests' driver (playwright-core, which drives Debian's Chromium) pinned npm packages

# As for the receiver: npm ci only when the CAMARA client's lock file changed since the last install.
$(OIDCCLIENT)/node_modules/.package-lock.json: $(OIDCCLIENT)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(OIDCCLIENT) --no-audit --no-fund --prefer-offline

.PHONY: oidcclient-deps
oidcclient-deps: $(OIDCCLIENT)/node_modules/.package-lock.json ## Install the CAMARA tests' OIDC client (openid-client) pinned npm packages

# As for the receiver: npm ci only when the test SMSC's lock file changed since the last install.
$(SMSC)/node_modules/.package-lock.json: $(SMSC)/package-lock.json
	@$(NODE_ENSURE)
	npm ci --prefix $(SMSC) --no-audit --no-fund --prefer-offline

.PHONY: smsc-deps
smsc-deps: $(SMSC)/node_modules/.package-lock.json ## Install the SMPP tests' SMSC (npm smpp) pinned npm packages

.PHONY: apidocs
apidocs: ## Refresh the vendored Redoc of /v1/api/docs from npm (version pinned in the script)
	gateway/internal/apidocs/vendor.sh

.PHONY: check-generated
check-generated: generate ## Fail when the committed generated code is stale
	@git add -N proto/gen $(SDK)/dist $(SDK_ASSETS) tests/openapi/apiclient $(CONSOLE)/src/api $(CONSOLE_DIST)
	@git diff --exit-code --stat -- proto/gen $(SDK)/dist $(SDK_ASSETS) tests/openapi/apiclient $(CONSOLE)/src/api $(CONSOLE_DIST) || { echo "generated code is stale: run make generate and commit"; exit 1; }

.PHONY: lint
# go vet's analyzers run inside golangci-lint (govet), on the same type-checked packages: a
# separate go vet pass type-checked the whole workspace again (about a minute on a cold cache).
lint: tools $(BIN)/.lint-tools ## buf lint, gofmt, and golangci-lint (.golangci.yml, go vet's analyzers among them) over every module
	$(BIN)/buf lint
	@out=$$(gofmt -l $(MODULES) tools); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@# One run over every module's packages (go.work joins them): the shared ones are analysed once.
	$(BIN)/golangci-lint run $(GOLANGCI_FLAGS) $(PKGS)

.PHONY: db-stop
db-stop: ## Stop the private PostgreSQL cluster, if one was started
	@d=.mnv/pg/data; [ -f $$d/PG_VERSION ] || exit 0; \
	pgbin=$$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1); \
	if [ "$$(id -u)" = 0 ]; then runuser -u postgres -- $$pgbin/pg_ctl -D $$d stop -m fast; else $$pgbin/pg_ctl -D $$d stop -m fast; fi

.PHONY: redis-stop
redis-stop: ## Stop the private Redis, if one was started
	@d=.mnv/redis; [ -f $$d/redis.pid ] || exit 0; \
	kill "$$(cat $$d/redis.pid)" 2>/dev/null || true; rm -f $$d/redis.pid $$d/port

.PHONY: clean
clean: ## Remove build output (not the local database)
	rm -rf $(BIN) out
