# The one test command: installs what the tests need when it is missing
# (Debian packages, Python packages, Go modules), then runs every test.
GO ?= go
# Packages whose tests are run with the race detector as well.
RACE_PKGS ?= ./internal/...

# How many inputs each fuzz target tries in make test (go test -fuzztime
# Nx), about 20 s each on two loaded cores. A count, not a duration: with a
# duration, Go's fuzz coordinator can fail a target with a bare "context
# deadline exceeded" when the clock runs out while a worker is mid-input
# (golang/go#75804, fixed in Go 1.27), on a loaded machine with nothing found.
# FUZZTIMEOUT bounds a worker that really hangs.
FUZZ_PROXY ?= 200000x
FUZZ_PUT ?= 40000x
FUZZ_BEARER ?= 200000x
FUZZ_FRAMES ?= 60000x
FUZZ_VOMS ?= 200000x
FUZZ_HEAD ?= 300000x
FUZZ_DAVXML ?= 100000x
FUZZTIMEOUT ?= 5m

# The nemesis (internal/nemesis): the whole lake under kills, pauses, a
# partition, divergent replicas, full disks and Redis killed, then every
# path read through every node and the history checked. make test runs
# make nemesis-ci: NEMESIS_CI for seed NEMESIS_CI_SEED; make nemesis runs
# NEMESIS_DURATION of a random seed (NEMESIS_SEED=N replays one) and
# prints it.
NEMESIS_CI ?= 3m
NEMESIS_CI_SEED ?= 1
NEMESIS_DURATION ?= 30m

# What lakefed version prints (cmd/lakefed/version.go). The go command
# stamps the commit into the binary on its own, but not in a git worktree
# (whose .git is a file) nor under GOFLAGS=-buildvcs=false, so the build
# says it. VERSION is the release tag the commit is at or after, if any.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED ?= $(shell test -z "$$(git status --porcelain 2>/dev/null)" || echo true)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.modified=$(MODIFIED)

# make install: the binary, the systemd units, the user they run as and
# the default config. PREFIX is /usr/local, where what an administrator
# builds by hand belongs; its lib/systemd/system is the directory systemd
# reads for "units installed by the administrator" (systemd.unit(5)),
# which leaves /etc/systemd/system to the site's own units and drop-ins,
# and /usr/lib/systemd/system to the distribution's packages (PREFIX=/usr).
# The units name the binary and the config where these say they are.
# systemd-sysusers reads /etc, /run and /usr/lib only, never /usr/local.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
SYSUSERSDIR ?= $(SYSCONFDIR)/sysusers.d
UNITS = lakefed.service lakefed-storage@.service

.PHONY: test deps build install vet fuzz bench-storage nemesis nemesis-ci
test: deps vet
	$(GO) test -race -timeout 25m $(RACE_PKGS)
	$(GO) test -timeout 15m ./cmd/... ./deploy/...
	$(MAKE) fuzz
	$(MAKE) nemesis-ci

# The fuzz targets, each for FUZZTIME: the federator's proxied ranges,
# the storage role's PUT headers, bearer tokens and Authorization headers,
# the root:// door's request frames, VOMS attribute certificates, and the
# fast HTTP/1.1 path's request heads against net/http's reading of them,
# and WebDAV multistatus answers against encoding/xml's reflection.
# Seeds run in every go test too.
fuzz:
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzProxyRange$$' -fuzztime $(FUZZ_PROXY) ./internal/federation/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzPutHeaders$$' -fuzztime $(FUZZ_PUT) ./internal/storage/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzBearer$$' -fuzztime $(FUZZ_BEARER) ./internal/auth/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzRequest$$' -fuzztime $(FUZZ_FRAMES) ./internal/xrootd/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzVOMSAC$$' -fuzztime $(FUZZ_VOMS) ./internal/auth/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzParseHead$$' -fuzztime $(FUZZ_HEAD) ./internal/httpx/fastpath/
	$(GO) test -timeout $(FUZZTIMEOUT) -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZ_DAVXML) ./internal/httpx/davxml/

nemesis-ci:
	NEMESIS_DURATION=$(NEMESIS_CI) NEMESIS_SEED=$(NEMESIS_CI_SEED) $(GO) test -v -tags nemesis -count=1 -timeout 20m -run '^TestNemesis$$' ./internal/nemesis/

nemesis:
	@seed=$${NEMESIS_SEED:-$$(od -An -N3 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "nemesis: seed $$seed, $(NEMESIS_DURATION)"; \
	NEMESIS_DURATION=$(NEMESIS_DURATION) NEMESIS_SEED=$$seed $(GO) test -v -tags nemesis -count=1 -timeout 90m -run '^TestNemesis$$' ./internal/nemesis/; \
	rc=$$?; echo "nemesis: seed $$seed (replay: make nemesis NEMESIS_SEED=$$seed)"; exit $$rc

deps:
	./scripts/install-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.6.1 ./...

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/lakefed ./cmd/lakefed

install: build
	install -d -m 0755 '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(SYSTEMDUNITDIR)' '$(DESTDIR)$(SYSUSERSDIR)' '$(DESTDIR)$(SYSCONFDIR)/lakefed'
	install -m 0755 bin/lakefed '$(DESTDIR)$(BINDIR)/lakefed'
	for u in $(UNITS); do \
	  sed -e 's|/usr/local/bin/lakefed|$(BINDIR)/lakefed|g' -e 's|/etc/lakefed/|$(SYSCONFDIR)/lakefed/|g' \
	    "deploy/systemd/$$u" > "$(DESTDIR)$(SYSTEMDUNITDIR)/$$u" && chmod 0644 "$(DESTDIR)$(SYSTEMDUNITDIR)/$$u" || exit 1; \
	done
	install -m 0644 deploy/systemd/lakefed.sysusers '$(DESTDIR)$(SYSUSERSDIR)/lakefed.conf'
	@# The config is the site's from the first install on: an existing one stays.
	test -e '$(DESTDIR)$(SYSCONFDIR)/lakefed/lakefed.yaml' || \
	  install -m 0644 deploy/lakefed.yaml '$(DESTDIR)$(SYSCONFDIR)/lakefed/lakefed.yaml'
	@test -n '$(DESTDIR)' || echo 'make install: now run systemd-sysusers, systemctl daemon-reload, systemctl enable --now lakefed'

bench-storage:
	./bench/storage.sh
