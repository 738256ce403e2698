package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

const good = `listen: 127.0.0.1:8080
storage:
  - listen: 127.0.0.1:9001
    root: /srv/a
federation:
  mode: redirect
  client_networks:
    - networks: [10.0.0.0/8]
      location: [46.2, 6.1]
  health:
    interval: 200ms
  endpoints:
    - name: site-a
      url: http://127.0.0.1:9001/
      location: [46.23, 6.05]
      writable: true
      timeout: 3s
    - name: site-b
      url: file:///srv/b
      prefix: /atlas
      path: /data
      priority: 2
      mode: proxy
`

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	f := c.Federation
	if got := len(f.Endpoints); got != 2 {
		t.Fatalf("endpoints = %d, want 2", got)
	}
	a, b := f.Endpoints[0], f.Endpoints[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"a.name", a.Name, "site-a"},
		{"a.timeout", a.Timeout, 3 * time.Second},
		{"a.prefix default", a.Prefix, "/"},
		{"a.path default", a.Path, "/"},
		{"a.priority default", a.Priority, 1},
		{"a.writable", a.Writable, true},
		{"a.location", a.Location.Known(), true},
		{"b.prefix", b.Prefix, "/atlas"},
		{"b.path", b.Path, "/data"},
		{"b.priority", b.Priority, 2},
		{"b.mode", b.EffectiveMode(f), "proxy"},
		{"a.mode", a.EffectiveMode(f), "redirect"},
		{"interval", f.Health.Interval.D(), 200 * time.Millisecond},
		{"fail_after default", f.Health.FailAfter, DefaultFailAfter},
		{"ttl default", f.MetadataCache.TTL.D(), DefaultTTL},
		{"placement default", f.Placement, "priority"},
		{"storage root", c.Storage[0].Root, "/srv/a"},
		{"log_format default", c.LogFormat, "text"},
		{"access_log default", c.AccessLog, false},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		{"unknown top key", "listen: :1\nfederaton: {}\n", []string{"line 2: federaton: unknown field"}},
		{"unknown endpoint key", `federation:
  endpoints:
    - name: a
      url: http://h/
    - name: b
      url: http://h2/
      priorty: 2
`, []string{"line 7: federation.endpoints[1].priorty: unknown field"}},
		{"missing url", `federation:
  endpoints:
    - name: a
      url: http://h/
    - name: b
`, []string{"line 5: federation.endpoints[1].url: missing"}},
		{"bad duration", `federation:
  health:
    interval: fast
  endpoints: [{name: a, url: "http://h/"}]
`, []string{"line 3: federation.health.interval: invalid duration \"fast\""}},
		{"wrong type", `federation:
  endpoints:
    - name: a
      url: http://h/
      priority: high
`, []string{"line 5: federation.endpoints[0].priority:"}},
		{"several problems at once", `federation:
  mode: fast
  endpoints:
    - name: a
      url: gopher://h/
      location: [100, 0]
    - name: a
      url: http://h/
      prefix: atlas/
`, []string{
			"line 2: federation.mode: \"fast\" is not one of redirect, proxy",
			"line 5: federation.endpoints[0].url: scheme \"gopher\"",
			"line 6: federation.endpoints[0].location: latitude 100",
			"line 7: federation.endpoints[1].name: \"a\" is also the name of endpoints[0]",
			"line 9: federation.endpoints[1].prefix:",
		}},
		{"no role", "listen: 127.0.0.1:1\n", []string{"no role configured"}},
		{"bad listen", "listen: nowhere\nfederation:\n  endpoints: [{name: a, url: 'http://h/'}]\n", []string{"line 1: listen: want host:port"}},
		{"mapping for scalar", "federation:\n  mode: {a: b}\n  endpoints: [{name: a, url: 'http://h/'}]\n", []string{"line 2: federation.mode: want a single value"}},
		{"bad upstream", "federation:\n  endpoints: [{name: a, url: 'file:///x', kind: upstream}]\n", []string{"federation.endpoints[0].url: kind \"upstream\" needs a URL of scheme http://, https://"}},
		{"unknown nested in storage", "storage:\n  - listen: 127.0.0.1:1\n    root: /x\n    rooot: /y\n", []string{"line 4: storage[0].rooot: unknown field"}},
		{"advertise with a path", "shared: {redis: 'redis://h:6379/0', advertise: 'http://h:8080/fed'}\nfederation:\n  endpoints: [{name: a, url: 'http://h/'}]\n",
			[]string{"line 1: shared.advertise: want http(s)://HOST:PORT"}},
		{"advertise not a URL", "shared: {redis: 'redis://h:6379/0', advertise: 'h:8080'}\nfederation:\n  endpoints: [{name: a, url: 'http://h/'}]\n",
			[]string{"line 1: shared.advertise: want http(s)://HOST:PORT"}},
		{"advertise without a federator", "shared: {redis: 'redis://h:6379/0', advertise: 'http://h:8080'}\ncache: {dir: /c, origin: 'http://o/', listen: '127.0.0.1:1'}\n",
			[]string{"line 1: shared.advertise: the URL of this process's federator: it needs a federation section"}},
		{"unknown log format", "log_format: xml\nstorage:\n  - {listen: '127.0.0.1:9001', root: /srv/a}\n", []string{`line 1: log_format: "xml" is not one of text, json`}},
		{"negative outage wait", "xroot_outage_wait: -1s\nlisten_xroot: 127.0.0.1:2\nfederation:\n  endpoints: [{name: a, url: 'http://h/'}]\n", []string{"line 1: xroot_outage_wait: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse error =\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

func TestFieldErrorsAreTyped(t *testing.T) {
	_, err := Parse([]byte("federation:\n  endpoints:\n    - name: a\n"))
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("Parse error %v is not a *FieldError", err)
	}
	if fe.Line != 3 || fe.Path != "federation.endpoints[0].url" {
		t.Errorf("FieldError = %+v, want line 3 at federation.endpoints[0].url", fe)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Fatal("Load(missing file) succeeded")
	}
}

// TestExampleFile: the shipped examples pass check-config: the one that
// runs as shipped and the commented reference beside it.
func TestExampleFile(t *testing.T) {
	for _, name := range []string{"federation.yaml", "reference.yaml"} {
		t.Run(name, func(t *testing.T) {
			if _, err := Load("../../examples/" + name); err != nil {
				t.Fatalf("examples/%s: %v", name, err)
			}
		})
	}
}

// shared.advertise defaults to the federator's listen address, with the
// host name for a wildcard and https with a certificate; one given keeps
// no trailing slash.
func TestAdvertiseDefault(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"listen: 127.0.0.1:8081\n", "http://127.0.0.1:8081"},
		{"listen: 0.0.0.0:8081\n", "http://" + host + ":8081"},
		{"listen: '[::]:8081'\n", "http://" + host + ":8081"},
		{"listen: ':8081'\n", "http://" + host + ":8081"},
		{"listen: fed.example.org:443\ntls_cert: c.pem\ntls_key: k.pem\n", "https://fed.example.org:443"},
		{"listen: 127.0.0.1:8081\nshared: {redis: 'redis://h:6379/0', advertise: 'http://lb.example.org:80/'}\n", "http://lb.example.org:80"},
	} {
		y := tt.yaml + "federation:\n  endpoints: [{name: a, url: 'http://h/'}]\n"
		if !strings.Contains(y, "shared:") {
			y += "shared: {redis: 'redis://h:6379/0'}\n"
		}
		c, err := Parse([]byte(y))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.yaml, err)
		}
		if c.Shared.Advertise != tt.want {
			t.Errorf("Parse(%q): shared.advertise = %q, want %q", tt.yaml, c.Shared.Advertise, tt.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"64MiB", 64 << 20, true}, {"10GB", 10e9, true},
		{"1.5KiB", 1536, true}, {"12 parsecs", 0, false}, {"-1", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestPresignRule: an s3 endpoint's pre-signed URLs must outlive the
// metadata cache TTL (the federator enforces it at start too), unless the
// endpoint is proxied; an absent presign_expiry counts as the s3 default.
func TestPresignRule(t *testing.T) {
	const head = "federation:\n  metadata_cache: {ttl: %s}\n  endpoints:\n    - name: a\n      url: http://h/\n"
	tests := []struct {
		name, ttl, ep string
		want          string // "" means valid
	}{
		{"explicit too short", "10m", "    - name: b\n      url: s3://bkt/\n      s3:\n        endpoint: h:9000\n        presign_expiry: 5m\n",
			"line 10: federation.endpoints[1].s3.presign_expiry: presign_expiry 5m0s is shorter than federation.metadata_cache.ttl 10m0s"},
		{"default too short", "2h", "    - name: b\n      url: s3://bkt/\n",
			"line 6: federation.endpoints[1].s3.presign_expiry: the default presign_expiry 1h0m0s is shorter"},
		{"explicit long enough", "10m", "    - name: b\n      url: s3://bkt/\n      s3: {endpoint: 'h:9000', presign_expiry: 10m}\n", ""},
		{"default long enough", "60s", "    - name: b\n      url: s3://bkt/\n", ""},
		{"proxied is exempt", "2h", "    - name: b\n      url: s3://bkt/\n      mode: proxy\n", ""},
		{"not s3", "2h", "    - name: b\n      url: http://h2/\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(head, tt.ttl) + tt.ep))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Parse = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestEveryScheme checks that the config accepts every scheme of the table
// kinds.New builds from (kinds.TestEveryScheme builds each), with the kind
// "kind:" may name for it, and refuses the schemes kinds.New refuses. It
// used to accept roots://, which no kind serves, and refuse xroot://.
func TestEveryScheme(t *testing.T) {
	for _, s := range endpoint.Schemes() {
		u := s.Name + "://h:1/x/"
		if s.NoHost {
			u = s.Name + ":///x"
		}
		kinds := []string{""}
		if s.Alt != "" {
			kinds = append(kinds, s.Alt)
		}
		for _, k := range kinds {
			y := fmt.Sprintf("federation:\n  endpoints: [{name: a, url: %q, kind: %q, s3: {endpoint: 'http://h:1'}}]\n", u, k)
			if _, err := Parse([]byte(y)); err != nil {
				t.Errorf("scheme %s, kind %q: %v", s.Name, k, err)
			}
		}
	}
	for _, u := range []string{"roots://h:1//x", "xroots://h:1//x", "gopher://h/", "s3s://b/"} {
		y := fmt.Sprintf("federation:\n  endpoints: [{name: a, url: %q}]\n", u)
		if _, err := Parse([]byte(y)); err == nil || !strings.Contains(err.Error(), "is not one of") {
			t.Errorf("url %s: Parse = %v, want a scheme error", u, err)
		}
	}
}

// TestEveryProblemReported: a decode error (a duration given as a bare
// number) does not hide the other problems of the file (a misspelt key,
// a bad URL): each is reported once, with its line.
func TestEveryProblemReported(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want []string // one problem each, in line order
	}{
		{"decode and validate", `federation:
  health:
    intervall: 2s
    timeout: 2
  endpoints:
    - name: a
      url: "gopher://h/"
`, []string{"line 3: federation.health.intervall: unknown field", "line 4: federation.health.timeout: invalid duration", "line 7: federation.endpoints[0].url: "}},
		{"decode only", "federation:\n  endpoints: [{name: a, url: 'http://h/'}]\ntests:\n  interval: 2\n",
			[]string{"line 4: tests.interval: invalid duration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("Parse accepted the file")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d problems reported, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, lines[i], w)
				}
			}
		})
	}
}
