# hongbao: run `make help` for the targets.
GO ?= go
PKGS := ./...
# The dashboard generator is a module of its own (the root's ./... skips it).
DASHBOARD_GEN := deploy/grafana/gen
# So is the Go client (few dependencies for the programs that call the API);
# its tests against a real service are in the root's internal/clienttest.
CLIENT := client
# apt-get needs root; as another user the install goes through sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help deps test test-deploy race short lint bench demo demo-web build image fuzz serve faults screenshots dashboard drill-images drill drill-short openapi proto

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install what the tests need (redis-server, redis-cli, PostgreSQL binaries, Chromium, Prometheus, Node.js and npm) when missing
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

test: deps ## vet, then every test under the race detector, on real redis-server processes (single servers and clusters); then the deployment's tests (deploy/)
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	cd $(CLIENT) && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd $(DASHBOARD_GEN) && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) test-deploy

# deploy/ is a module of its own (compose, Helm and Kubernetes libraries stay
# out of the library's go.mod), so ./... at the root skips it. The image
# test needs a container engine (docker) and skips, saying so, without one
# (fails under CI=true).
test-deploy: ## the deployment's tests: the compose file, the Helm chart against the Kubernetes schemas, the image
	cd deploy && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...
	$(DRILL_GO) vet ./... && GOFLAGS="$$GOFLAGS -mod=mod" $(GO) test -race -count=1 ./...

race: test ## same as test

short: deps ## the tests without the race detector (quicker)
	$(GO) test -count=1 $(PKGS)
	cd $(CLIENT) && $(GO) test -count=1 ./...
	cd $(DASHBOARD_GEN) && $(GO) test -count=1 ./...

lint: ## go vet and staticcheck, of the library, the client, deploy/ and the dashboard generator
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)
	cd $(CLIENT) && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd deploy && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	$(DRILL_GO) vet ./... && GOFLAGS="$$GOFLAGS -mod=mod" $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd $(DASHBOARD_GEN) && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

openapi: ## regenerate httpapi/openapi.json from its Go table (cmd/hongbao/internal/apispec)
	$(GO) run ./cmd/hongbao/internal/apispec/gen -o httpapi/openapi.json

# buf and protoc-gen-es come from npm, pinned by proto/package-lock.json;
# the Go plugins are go.mod tools (go tool protoc-gen-go, ...).
proto: ## regenerate client/hongbaov1 (Go, Connect) and clients/ts/src/gen (TypeScript) from proto/
	cd proto && npm ci --no-audit --no-fund --silent
	proto/node_modules/.bin/buf lint
	proto/node_modules/.bin/buf generate

dashboard: ## regenerate deploy/grafana/hongbao.json with the Grafana foundation SDK (its own module)
	cd $(DASHBOARD_GEN) && $(GO) run . -o ../hongbao.json

fuzz: ## run each fuzz test for a while
	$(GO) test -run XXX -fuzz FuzzSplit -fuzztime 30s ./split
	$(GO) test -run XXX -fuzz FuzzParseCents -fuzztime 30s ./money
	$(GO) test -run XXX -fuzz FuzzParseClaim -fuzztime 30s ./internal/redisstore
	$(GO) test -run XXX -fuzz FuzzDecodeCreate -fuzztime 30s ./httpapi
	$(GO) test -run XXX -fuzz FuzzDecodeEmpty -fuzztime 30s ./httpapi
	$(GO) test -run XXX -fuzz FuzzUserIDRuleAgrees -fuzztime 30s ./internal/clienttest

faults: deps ## the long fault tests and the soak (docs/durability.md): failover, flush and rebuild, proxy, PostgreSQL restarts, histories under faults, settle processes SIGKILLed on a cluster, 1,000,000 users x 2 clicks
	HONGBAO_LONG_FAULTS=1 $(GO) test -count=1 -timeout 90m -v -run 'TestFailoverRain|TestFlushThenRebuild|TestProxyFaultsRain|TestHistoryUnderFaults|TestHistoryOnCluster|TestSoak|TestPartsCrashOnCluster' ./cmd/hongbao/internal/cli/
	HONGBAO_LONG_FAULTS=1 $(GO) test -count=1 -timeout 30m -v -run TestSettleThroughRestarts ./ledger/postgres/

bench: ## Go benchmarks
	$(GO) test -run XXX -bench . -benchmem $(PKGS)

build: ## build the binary into ./bin
	$(GO) build -o bin/hongbao ./cmd/hongbao

HONGBAO_IMAGE ?= hongbao:dev

image: ## the container image hongbao:dev: a static binary on scratch (deploy/docker/Dockerfile)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o bin/image/hongbao ./cmd/hongbao
	mkdir -p bin/image/data
	docker build -f deploy/docker/Dockerfile -t $(HONGBAO_IMAGE) bin/image

# deploy/drill is a module of its own that uses the library's internals
# through a replace of the root: -mod=mod lets it follow the root's
# requirements as they change, without a tidy of its go.mod each time.
DRILL_GO := cd deploy/drill && GOFLAGS="$$GOFLAGS -mod=mod" $(GO)

# The drill (deploy/drill, a module of its own) drives the compose stack
# with the images of make drill-images; DRILL_FLAGS adds its flags
# (bin/drill -h lists them).
drill: ## the stack up, a rain and a discount rush through both APIs while a nemesis kills, restarts, fails over and freezes its processes; history checked, alerts asserted, JSON report (about 11 min)
	$(DRILL_GO) build -o ../../bin/drill .
	bin/drill -report bin/drill-report.json $(DRILL_FLAGS)

drill-short: ## the drill with every fault but no wait for the alerts (faults held 10 s; about 5 min)
	$(DRILL_GO) build -o ../../bin/drill .
	bin/drill -alerts=false -users 1500 -packets 1000 -report bin/drill-report.json $(DRILL_FLAGS)

drill-images: ## every image of deploy/compose built here from Debian packages (no pull), the compose CLI plugin when missing; writes deploy/drill/images.env
	bash deploy/drill/images.sh

demo: ## a full red packet rain on the embedded default
	$(GO) run ./cmd/hongbao demo

demo-web: ## a rain to play in a browser, and the console, on 127.0.0.1:8080 (Ctrl-C stops it)
	$(GO) run ./cmd/hongbao demo --web

screenshots: deps ## the browser tests with a paced rain; refresh docs/console.png and docs/play.png
	rm -rf bin/screenshots
	HONGBAO_SCREENSHOTS=$(CURDIR)/bin/screenshots HONGBAO_SCREENSHOT_RAIN=30s \
		$(GO) test -count=1 -run 'TestConsoleFollowsRain|TestPlayOnPhone' ./httpapi/web/
	cp bin/screenshots/console-desktop.png docs/console.png
	cp bin/screenshots/play-phone.png docs/play.png

serve: ## the HTTP service on 127.0.0.1:8080 (own durable Redis, SQLite ledger in ./hongbao-data)
	$(GO) run ./cmd/hongbao serve
