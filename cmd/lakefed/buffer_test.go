package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// bufferFed runs a federator with a write buffer: files under /out go to
// site-a alone, files under /keep also to a storage server that is down.
// It writes three files under /out and two under /keep, and waits until
// the three have migrated and both under /keep have failed on the dead
// target. It returns the federator's URL and the dead target's URL.
func bufferFed(t *testing.T) (string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/"
	ln.Close()
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.Buffer = &config.Buffer{Dir: t.TempDir(), MaxBytes: 64 << 20,
			Retry: config.Retry{Initial: config.Duration(50 * time.Millisecond), Max: config.Duration(300 * time.Millisecond)},
			Prefixes: []config.BufferPrefix{
				{Prefix: "/out", Targets: []string{"site-a"}},
				{Prefix: "/keep", Targets: []string{"site-a", dead}},
			}}
	}})
	for i, p := range []string{"/out/a.root", "/out/b.root", "/out/c.root", "/keep/x.dat", "/keep/y.dat"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, fed.URL+p,
			bytes.NewReader(bytes.Repeat([]byte{byte(i)}, (i+1)<<20)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d, want 201", p, resp.StatusCode)
		}
	}
	var st bufferStatusJSON
	if !testenv.Within(30*time.Second, func() bool {
		st = apiBuffer(t, fed.URL)
		return st.Migrated == 3 && st.PendingFiles == 2 && len(st.Failures) == 2
	}) {
		t.Fatalf("the buffer did not reach 3 migrated and 2 failing files: %+v", st)
	}
	return fed.URL, dead
}

func apiBuffer(t *testing.T, base string) bufferStatusJSON {
	t.Helper()
	resp, err := http.Get(base + "/api/buffer")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st bufferStatusJSON
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /api/buffer: %v", err)
	}
	return st
}

// TestBufferStatus: "lakefed buffer status" against a running buffer
// prints one figure a line with its unit, every target with its
// throughput and every failure with its reason; --json prints the API's
// JSON.
func TestBufferStatus(t *testing.T) {
	base, dead := bufferFed(t)

	r := mustRun(t, "buffer", "status", "--url", base)
	for _, re := range []string{
		`(?m)^pending: +2 files, 9\.0 MiB \(acknowledged, not yet verified on every target\)$`,
		`(?m)^oldest pending: +[0-9.]+(ms|s|m[0-9]+s)$`,
		// Migrated files stay an hour (keep_after_migration's default).
		`(?m)^held on disk: +5 files, 15\.0 MiB \(pending, and migrated files kept to be read locally\)$`,
		`(?m)^disk used: +15\.0 MiB of 64\.0 MiB \(23\.4 %\)$`,
		`(?m)^migrated: +3 files since start \(verified on every target\)$`,
		`(?m)^failing: +2 files$`,
		`(?m)^  site-a +5 files, 15\.0 MiB in [0-9.]+(ms|s) +[0-9.]+ MB/s +0 copies failed$`,
		`(?m)^  ` + regexp.QuoteMeta(dead) + ` +0 files, 0 B in 0s +no copy yet +[0-9]+ cop(y|ies) failed`,
		`(?m)^ +last error: .*connection refused`,
		`(?m)^  /keep/x\.dat -> ` + regexp.QuoteMeta(dead) + `: unavailable, [0-9]+ attempts?, retry (due now|in [0-9.]+m?s): .*connection refused$`,
		`(?m)^  /keep/y\.dat -> `,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("buffer status: no line matching %s in:\n%s", re, r.stdout)
		}
	}

	r = mustRun(t, "buffer", "status", "--json", "--url", base+"/")
	var st bufferStatusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("buffer status --json: %v\n%s", err, r.stdout)
	}
	if st.PendingFiles != 2 || st.PendingBytes != 9<<20 || st.Migrated != 3 || len(st.Failures) != 2 ||
		len(st.Targets) != 2 || len(st.History) == 0 || st.MaxBytes != 64<<20 {
		t.Errorf("buffer status --json = %+v, want the API's status (2 pending, 9 MiB, 3 migrated, 2 failing, 2 targets, a history)", st)
	}
	for _, k := range []string{`"pending_files"`, `"oldest_pending_seconds"`, `"history"`, `"bytes_per_second"`} {
		if !strings.Contains(r.stdout, k) {
			t.Errorf("buffer status --json lacks the API's key %s", k)
		}
	}
}

// TestBufferStatusErrors: the exit code tells a federator without a
// buffer (3) from one that does not answer (4) and from a usage mistake
// (2), and "lakefed buffer" names what it takes.
func TestBufferStatusErrors(t *testing.T) {
	noBuffer := servertest.Start(t, servertest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no buffer", []string{"buffer", "status", "--url", noBuffer.URL}, exitNotFound, "does this lakefed run a buffer"},
		{"down", []string{"buffer", "status", "--url", down, "--timeout", "2s"}, exitUnavailable, "connection refused"},
		{"no subcommand", []string{"buffer"}, exitUsage, "lakefed buffer status"},
		{"other subcommand", []string{"buffer", "serve"}, exitUsage, "lakefed buffer status"},
		{"bad url", []string{"buffer", "status", "--url", "127.0.0.1:8080"}, exitUsage, "want http(s)://HOST:PORT"},
		{"extra argument", []string{"buffer", "status", "x"}, exitUsage, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := lakefed(t, tc.args...)
			if r.code != tc.code || strings.Count(r.stderr, tc.msg) != 1 {
				t.Errorf("lakefed %q: exit %d, stderr %q; want exit %d and %q once", tc.args, r.code, r.stderr, tc.code, tc.msg)
			}
		})
	}
}
