// Package arch holds tests of the code's shape: which package may import
// which. It has no code of its own.
package arch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/lakefed/lakefed/"

// layers ranks every package tree, lowest first: a package may import
// packages of a lower rank, and packages of its own tree (the tree is the
// prefix given here; the first prefix that matches places a package, so
// the more specific come first). A new package tree must be given a rank
// here: the test fails on a package it cannot place. The map is in
// docs/architecture.md and ../shared/DESIGN.md.
var layers = []struct {
	prefix string
	rank   int
}{
	{"internal/httpx/transport", 2}, // the one HTTP client: TLS from endpoint.Config
	{"internal/httpx/davxml", 2},    // the one multistatus parser: fills endpoint.Info
	{"internal/httpx/fastpath", 1},  // the lean HTTP/1.1 loop in front of net/http: storage role and federator
	{"internal/httpx", 0},
	{"internal/keptsum", 1},   // checksums kept beside files: storage role and posix kind
	{"internal/endpoint/", 3}, // the kinds, the kind table, the conformance suite
	{"internal/endpoint", 1},  // the interface, its errors, the scheme table
	{"internal/transfer", 4},
	{"internal/results", 2},
	{"internal/config", 2},
	{"internal/storage", 3}, // its third-party copy uses the one HTTP client (httpx/transport)
	{"internal/bench", 5},
	{"internal/federation", 5},
	{"internal/cache", 5},     // a role beside the federator: its origin is an endpoint.Endpoint
	{"internal/buffer", 5},    // a role beside the federator: its targets are endpoints
	{"internal/xrootd", 5},    // the root:// door: serves a namespace given as an interface
	{"internal/auth", 1},      // TLS trust, tokens, identities, path rules: a leaf every role may use
	{"internal/shared", 1},    // the Redis client of the shared state: a leaf the roles are given
	{"internal/durable", 0},   // the steps of a crash-proof upload: storage role and buffer
	{"internal/logging/", 10}, // logtest: a test helper that reads what a logger wrote
	{"internal/logging", 1},   // the one way a process logs: format, request IDs; config names its formats
	{"internal/sitetest", 6},
	{"internal/web", 7},
	{"internal/server", 8},
	{"internal/demo", 9},
	{"internal/interop", 10},
	{"internal/nemesis", 10}, // the fault run: its runner starts the lake as the interop tests do
	{"internal/arch", 10},
	{"docs", 10},             // the docs' test: README length, links and anchors, roles.svg
	{"deploy", 10},           // the units' and the install's tests
	{"internal/testenv", 10}, // test helpers: imported by tests only (see below)
	{"cmd/", 11},
	{"bench/cmd/", 11},
}

// only lists, for some trees, every internal tree they may import at all
// (besides their own): the rules the ranks alone do not say.
var only = map[string][]string{
	// The endpoint interface knows nothing of any kind or role.
	"internal/endpoint": {"internal/httpx"},
	// The fast path is a piece of HTTP serving: it knows request IDs and
	// nothing of any role.
	"internal/httpx/fastpath": {"internal/httpx"},
	// The kinds speak their protocols; they know no role.
	"internal/endpoint/": {"internal/endpoint", "internal/httpx", "internal/keptsum", "internal/durable"},
	// bench measures endpoints and stores results; it knows no role.
	"internal/bench": {"internal/endpoint", "internal/httpx", "internal/transfer", "internal/results"},
	// config owns the YAML shape of every role and imports none of them.
	"internal/config": {"internal/endpoint", "internal/httpx", "internal/logging"},
	// The roles beside the federator know it only through interfaces the
	// server wires; none of them names another role.
	"internal/cache":   {"internal/endpoint", "internal/httpx", "internal/transfer", "internal/auth"},
	"internal/buffer":  {"internal/endpoint", "internal/httpx", "internal/transfer", "internal/auth", "internal/durable"},
	"internal/xrootd":  {"internal/endpoint", "internal/httpx", "internal/auth"},
	"internal/auth":    {"internal/httpx"},
	"internal/shared":  {},
	"internal/durable": {},
	"internal/logging": {"internal/httpx"},
}

// thirdParty lists, for some trees, every module outside this one (and
// outside the standard library) they may import: a leaf every role
// serves through stays small.
var thirdParty = map[string][]string{
	"internal/httpx/fastpath": {"golang.org/x/net/", "golang.org/x/sys/"},
}

// never lists imports forbidden whatever the ranks say.
var never = map[string][]string{
	// The federator talks to endpoints through the interface; kinds are
	// built for it (endpoint/kinds), never named by it.
	"internal/federation": {"internal/endpoint/posix", "internal/endpoint/http", "internal/endpoint/s3",
		"internal/endpoint/xroot", "internal/endpoint/upstream"},
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bufio.NewReader(bytes.NewReader(out)))
	n := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		from := strings.TrimPrefix(p.ImportPath, module)
		fromTree, fromRank, ok := place(from)
		if !ok {
			t.Errorf("%s: no layer for this package; give its tree a rank in layers", from)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				if !thirdPartyAllowed(fromTree, imp) {
					t.Errorf("%s imports %s: not in what %s may import from outside the module", from, imp, fromTree)
				}
				continue
			}
			to := strings.TrimPrefix(imp, module)
			toTree, toRank, ok := place(to)
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", from, to)
			case toTree == "internal/testenv" && fromTree != "internal/testenv":
				t.Errorf("%s imports the test helpers %s outside its tests", from, to)
			case toTree == fromTree:
			case toRank >= fromRank:
				t.Errorf("%s (rank %d) imports %s (rank %d): an upward or sideways import", from, fromRank, to, toRank)
			case !allowed(fromTree, to):
				t.Errorf("%s imports %s: not in what %s may import", from, to, fromTree)
			}
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d packages; the test is not looking at the module", n)
	}
}

// place returns the tree and rank of a package path relative to the
// module.
func place(p string) (string, int, bool) {
	for _, l := range layers {
		if p == l.prefix || strings.HasPrefix(p, strings.TrimSuffix(l.prefix, "/")+"/") {
			return l.prefix, l.rank, true
		}
	}
	return "", 0, false
}

func allowed(fromTree, to string) bool {
	for _, bad := range never[fromTree] {
		if to == bad || strings.HasPrefix(to, bad+"/") {
			return false
		}
	}
	list, ok := only[fromTree]
	if !ok {
		return true
	}
	for _, good := range list {
		if to == good || strings.HasPrefix(to, good+"/") {
			return true
		}
	}
	return false
}

// thirdPartyAllowed reports whether a package of fromTree may import imp,
// a package outside the module: the standard library (no dot in its
// first element) always, others as thirdParty says.
func thirdPartyAllowed(fromTree, imp string) bool {
	list, ok := thirdParty[fromTree]
	if !ok || !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
		return true
	}
	for _, good := range list {
		if strings.HasPrefix(imp, good) {
			return true
		}
	}
	return false
}

// TestLayersCatchesUpward checks the checker: an import from the leaf to
// a role is refused.
func TestLayersCatchesUpward(t *testing.T) {
	fromTree, fromRank, _ := place("internal/httpx")
	_, toRank, _ := place("internal/federation")
	if toRank < fromRank {
		t.Fatalf("httpx ranks above federation")
	}
	if allowed("internal/config", "internal/storage") {
		t.Errorf("config may import storage")
	}
	if allowed("internal/federation", "internal/endpoint/upstream") {
		t.Errorf("federation may import a kind")
	}
	if thirdPartyAllowed("internal/httpx/fastpath", "github.com/prometheus/client_golang/prometheus") {
		t.Errorf("fastpath may import prometheus")
	}
	if !thirdPartyAllowed("internal/httpx/fastpath", "golang.org/x/net/http/httpguts") || !thirdPartyAllowed("internal/httpx/fastpath", "net/http") {
		t.Errorf("fastpath may not import x/net or the standard library")
	}
	_ = fromTree
}
