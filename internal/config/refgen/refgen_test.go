package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lakefed/lakefed/internal/config"
)

// Paths from this package's directory.
const (
	configDir     = ".." // internal/config
	docsFile      = "../../../docs/config.md"
	referenceFile = "../../../examples/reference.yaml"
)

// docs/config.md is what go generate writes from the comments as they
// are now.
func TestDocsUpToDate(t *testing.T) {
	want, err := generate(configDir)
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	got, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatalf("%v: run go generate ./...", err)
	}
	if !bytes.Equal(got, want) {
		line, g, w := firstDiff(got, want)
		t.Fatalf("docs/config.md is not what internal/config's doc comments make: run go generate ./...\n"+
			"line %d is\n\t%s\nwant\n\t%s", line, g, w)
	}
}

// firstDiff returns the first line where a and b differ, and its text in
// each.
func firstDiff(a, b []byte) (n int, la, lb string) {
	as, bs := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for n = 0; n < len(as) || n < len(bs); n++ {
		la, lb = "(end of file)", "(end of file)"
		if n < len(as) {
			la = as[n]
		}
		if n < len(bs) {
			lb = bs[n]
		}
		if la != lb {
			break
		}
	}
	return n + 1, la, lb
}

// Every field that is a key of the file has a doc comment: it is the
// key's text in the reference.
func TestEveryKeyDocumented(t *testing.T) {
	m, err := loadModel(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.documented(); err != nil {
		t.Fatal(err)
	}
}

// snippet is a config package in miniature: a documented key, keys
// without a doc comment (a line comment is not one) at the top and in a
// section, and fields that are no keys.
const snippet = `package config

import "time"

// Config is the file.
type Config struct {
	// Listen is where to listen.
	Listen string ` + "`yaml:\"listen\"`" + `
	Bare int ` + "`yaml:\"bare\"`" + `
	Trailing time.Duration ` + "`yaml:\"trailing\"`" + ` // not a doc comment
	// Nested is a section.
	Nested *Inner ` + "`yaml:\"nested\"`" + `
	// Items are a list of sections.
	Items []Inner ` + "`yaml:\"items\"`" + `
	Skipped string ` + "`yaml:\"-\"`" + `
	hidden  string
}

// Inner is a section.
type Inner struct {
	// Name is documented.
	Name string ` + "`yaml:\"name\"`" + `
	Deep []string ` + "`yaml:\"deep\"`" + `
}
`

// noModule is the loader of a package alone: every import is outside the
// module.
type noModule struct{}

func (noModule) load(string) (*pkg, error) { return nil, nil }

func snippetModel(t *testing.T, src string) *model {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(newPkg("config", "internal/config", []*ast.File{f}), noModule{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The check that TestEveryKeyDocumented and go generate run fails on a
// field without a doc comment, and names it.
func TestUndocumentedFieldFails(t *testing.T) {
	m := snippetModel(t, snippet)
	err := m.documented()
	if err == nil {
		t.Fatal("documented() = nil for fields without doc comments")
	}
	want := []string{"config.Config.Bare (bare)", "config.Config.Trailing (trailing)",
		"config.Inner.Deep (nested.deep)", "config.Inner.Deep (items[].deep)"}
	if !slices.Equal(m.undocumented, want) {
		t.Errorf("undocumented = %q, want %q", m.undocumented, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("documented() = %q, want it to name %s", err, w)
		}
	}
	for _, no := range []string{"Listen", "Skipped", "hidden", "Name"} {
		if strings.Contains(err.Error(), "."+no+" ") {
			t.Errorf("documented() = %q names %s", err, no)
		}
	}
	if _, err := m.markdown(); err != nil {
		t.Errorf("markdown() = %v", err)
	}
}

// How the model names keys and types, and how a comment reads.
func TestSnippetReference(t *testing.T) {
	m := snippetModel(t, snippet)
	var got []string
	m.root.walk(func(k *key) { got = append(got, k.path+": "+k.typ) })
	want := []string{"listen: string", "bare: integer", "trailing: duration", "nested: mapping",
		"nested.name: string", "nested.deep: list of strings", "items: list of mappings",
		"items[].name: string", "items[].deep: list of strings"}
	if !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
	md, err := m.markdown()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## `items[]`\n", "### `items[].name`\n\n**Type:** string\n\n`name` is documented.\n",
		"- [`nested`](#nested)\n", "`listen` is where to listen."} {
		if !bytes.Contains(md, []byte(w)) {
			t.Errorf("markdown() lacks %q:\n%s", w, md)
		}
	}
}

// A type that contains itself, directly or inline, has endless YAML;
// the builder says so instead of recursing.
func TestSelfContainingType(t *testing.T) {
	for name, field := range map[string]string{
		"field":  "// Next is the same again.\n\tNext *Config `yaml:\"next\"`",
		"inline": "*Config `yaml:\",inline\"`",
	} {
		src := "package config\n\n// Config is the file.\ntype Config struct {\n\t" + field + "\n}\n"
		f, err := parser.ParseFile(token.NewFileSet(), "config.go", src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		_, err = buildModel(newPkg("config", "internal/config", []*ast.File{f}), noModule{})
		if err == nil || !strings.Contains(err.Error(), "config.Config contains itself") {
			t.Errorf("%s: buildModel = %v, want config.Config contains itself", name, err)
		}
	}
}

func TestProse(t *testing.T) {
	r := &renderer{known: map[string]bool{"max_bytes": true, "cache.listen_xroot": true}, keyRE: keyPattern()}
	names := map[string]string{"MaxBytes": "max_bytes", "Redis": "redis", "TLSKey": "tls_key", "Mode": "mode"}
	for _, tt := range []struct{ doc, lead, leadKey, want string }{
		{"Redis is the Redis URL.", "Redis", "redis", "`redis` is the Redis URL.\n"},
		{"MaxBytes bounds; with TLSKey, Federation.Mode and Mode.", "", "", "`max_bytes` bounds; with `tls_key`, Federation.Mode and Mode.\n"},
		{"Both max_bytes and cache.listen_xroot, not kXR_wait or a/max_bytes.", "", "",
			"Both `max_bytes` and `cache.listen_xroot`, not kXR\\_wait or a/max\\_bytes.\n"},
		{"Cache is a type.\n\n\tcache:\n\t  max_bytes: 1\n", "Cache", "", "Cache is a type.\n\n\tcache:\n\t  max_bytes: 1\n"},
		{"Listener is not Listen.", "Listen", "listen", "Listener is not Listen.\n"},
	} {
		if got := r.prose(tt.doc, names, tt.lead, tt.leadKey); got != tt.want {
			t.Errorf("prose(%q) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"`federation.endpoints[].url`": "federationendpointsurl",
		"Top level":                    "top-level",
		"`storage[].tls_cert`":         "storagetls_cert",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// examples/reference.yaml shows every key of the model, and no other.
// A key it shows commented out ("# key: value", as it shows optional
// ones) counts, and is checked as well: with those lines uncommented,
// the file must still load. (TestExampleFile in internal/config loads
// it as it is.)
func TestReferenceYAML(t *testing.T) {
	data, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	all := uncomment(data)
	if _, err := config.Parse(all); err != nil {
		t.Fatalf("examples/reference.yaml with its commented-out keys uncommented does not load:\n%v", err)
	}
	m, err := loadModel(configDir)
	if err != nil {
		t.Fatal(err)
	}
	unknown, missing, err := coverage(m, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range unknown {
		t.Errorf("examples/reference.yaml: %s is no key of the config", p)
	}
	for _, p := range missing {
		t.Errorf("examples/reference.yaml: %s is missing: add it, commented out when optional, with a comment and an example value", p)
	}
}

// The coverage check names a key the file lacks and one the model lacks.
func TestCoverageFails(t *testing.T) {
	m := snippetModel(t, snippet)
	yml := uncomment([]byte("listen: x\n# bare: 1\nnested:\n  name: n\n  extra: 1\nitems:\n  - {name: a}\n  - {deep: [b]}\n"))
	unknown, missing, err := coverage(m, yml)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nested.extra"}; !slices.Equal(unknown, want) {
		t.Errorf("unknown = %q, want %q", unknown, want)
	}
	if want := []string{"trailing", "nested.deep"}; !slices.Equal(missing, want) {
		t.Errorf("missing = %q, want %q", missing, want)
	}
}

// uncomment turns the commented-out keys of a YAML file into keys: a
// line "# key: value" whose rest, with "# " taken away, is a key at its
// indentation.
func uncomment(data []byte) []byte {
	commentedKey := regexp.MustCompile(`(?m)^([ \t]*)# ([ \t]*[a-z][a-z0-9_]*:(?:[ \t].*)?)$`)
	return commentedKey.ReplaceAll(data, []byte("$1$2"))
}

// coverage compares the keys of a YAML document with the model's:
// unknown are those of the document the model lacks, missing those of
// the model the document lacks, each as a path, list items as "[]".
func coverage(m *model, data []byte) (unknown, missing []string, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, nil, fmt.Errorf("want one YAML document")
	}
	seen := map[string]bool{}
	keysIn(m.root, doc.Content[0], seen, &unknown)
	m.root.walk(func(k *key) {
		if !seen[k.path] {
			missing = append(missing, k.path)
		}
	})
	return unknown, missing, nil
}

// keysIn marks the keys of the mapping n, a value of section s, as seen,
// and those s does not have as unknown.
func keysIn(s *section, n *yaml.Node, seen map[string]bool, unknown *[]string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, v := n.Content[i].Value, n.Content[i+1]
		var k *key
		for _, c := range s.keys {
			if c.name == name {
				k = c
			}
		}
		if k == nil {
			*unknown = append(*unknown, join(s.path, name))
			continue
		}
		seen[k.path] = true
		if k.sub == nil {
			continue
		}
		switch k.container {
		case "list":
			for _, item := range v.Content {
				keysIn(k.sub, item, seen, unknown)
			}
		case "map":
			for j := 1; j < len(v.Content); j += 2 {
				keysIn(k.sub, v.Content[j], seen, unknown)
			}
		default:
			keysIn(k.sub, v, seen, unknown)
		}
	}
}
