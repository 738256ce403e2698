# The one test command: installs what the tests need when it is missing
# (Debian packages, Python packages, Go modules), then runs every test.
GO ?= go
# Packages whose tests are run with the race detector as well.
RACE_PKGS ?= ./internal/...

# How long each fuzz target runs in make test (go test -fuzztime).
FUZZTIME ?= 20s

.PHONY: test deps build vet fuzz bench-storage
test: deps vet
	$(GO) test -race -timeout 25m $(RACE_PKGS)
	$(GO) test -timeout 15m ./cmd/...
	$(MAKE) fuzz

# The fuzz targets, each for FUZZTIME: the federator's proxied ranges,
# the storage role's PUT headers, bearer tokens and Authorization headers,
# and the root:// door's request frames. Seeds run in every go test too.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzProxyRange$$' -fuzztime $(FUZZTIME) ./internal/federation/
	$(GO) test -run '^$$' -fuzz '^FuzzPutHeaders$$' -fuzztime $(FUZZTIME) ./internal/storage/
	$(GO) test -run '^$$' -fuzz '^FuzzBearer$$' -fuzztime $(FUZZTIME) ./internal/auth/
	$(GO) test -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZTIME) ./internal/xrootd/

deps:
	./scripts/install-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

build:
	$(GO) build -o bin/lakefed ./cmd/lakefed

bench-storage:
	./bench/storage.sh
