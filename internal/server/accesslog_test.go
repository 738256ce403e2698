package server_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/logging/logtest"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestRequestIDThroughFederator: the federator answers every request
// with X-Request-ID (the client's when sane, else a fresh one), and the
// access log lines of the federator and of the storage site it proxies
// from carry the IDs of their answers; so does another line logged while
// the request is handled. In both log formats, each line read back whole.
func TestRequestIDThroughFederator(t *testing.T) {
	fresh := regexp.MustCompile(`^[0-9a-f]{16}$`)
	for _, format := range []string{logging.Text, logging.JSON} {
		t.Run(format, func(t *testing.T) {
			var buf testenv.SyncBuffer
			log, err := logging.New(&buf, format, nil)
			if err != nil {
				t.Fatal(err)
			}
			fed := servertest.Start(t, servertest.Options{Log: log, Configure: func(c *config.Config) {
				c.AccessLog = true
				c.Storage[0].AccessLog = true
				c.Federation.Mode = "proxy"
				c.Operator.Anonymous = []string{"10.0.0.0/8"}
			}})
			if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), []byte("12345"), 0o644); err != nil {
				t.Fatal(err)
			}
			// waitLine returns the first log line with request_id id
			// and msg from component ("": the federator's listener,
			// which names none), once the server has written it.
			waitLine := func(t *testing.T, id, msg, component string) logtest.Line {
				t.Helper()
				var line logtest.Line
				if !testenv.Within(10*time.Second, func() bool {
					lines, _ := logtest.Parse(buf.String())
					for _, l := range lines {
						if l[logging.RequestIDKey] == id && l["msg"] == msg && l["component"] == component {
							line = l
							return true
						}
					}
					return false
				}) {
					t.Fatalf("no %q log line with request_id %s:\n%s", msg, id, buf.String())
				}
				return line
			}
			get := func(t *testing.T, method, path, sent string) (*http.Response, string) {
				t.Helper()
				req, err := http.NewRequest(method, fed.URL+path, strings.NewReader(""))
				if err != nil {
					t.Fatal(err)
				}
				if sent != "" {
					req.Header.Set("X-Request-ID", sent)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp, string(b)
			}

			t.Run("proxied read", func(t *testing.T) {
				resp, body := get(t, "GET", "/f", "")
				id := resp.Header.Get("X-Request-ID")
				if resp.StatusCode != 200 || body != "12345" || !fresh.MatchString(id) {
					t.Fatalf("GET /f = %d %q, X-Request-ID %q; want 200, the file and a fresh ID", resp.StatusCode, body, id)
				}
				l := waitLine(t, id, "request", "")
				if l["method"] != "GET" || l["path"] != "/f" || l["status"] != "200" || l["bytes"] != "5" {
					t.Errorf("federator's log line = %v, want GET /f 200 of 5 bytes", l)
				}
				// The federator's reads of the site carried the ID:
				// the site logged its answers under it.
				waitLine(t, id, "request", "storage")
			})
			t.Run("client's ID", func(t *testing.T) {
				const sent = "job-42.attempt-3"
				resp, _ := get(t, "HEAD", "/missing", sent)
				if id := resp.Header.Get("X-Request-ID"); id != sent || resp.StatusCode != 404 {
					t.Fatalf("HEAD /missing = %d, X-Request-ID %q; want 404 and %q", resp.StatusCode, id, sent)
				}
				if l := waitLine(t, sent, "request", ""); l["status"] != "404" || l["method"] != "HEAD" {
					t.Errorf("log line = %v, want HEAD ... 404", l)
				}
			})
			t.Run("another line about the request", func(t *testing.T) {
				// The operator's pages are closed to loopback here:
				// the refusal is logged while the request is handled.
				resp, _ := get(t, "GET", "/api/endpoints", "op-1")
				if resp.Header.Get("X-Request-ID") != "op-1" || resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("GET /api/endpoints = %d, X-Request-ID %q; want 401 and op-1", resp.StatusCode, resp.Header.Get("X-Request-ID"))
				}
				if l := waitLine(t, "op-1", "operator page refused", "operator"); l["path"] != "/api/endpoints" {
					t.Errorf("refusal line = %v, want path /api/endpoints", l)
				}
				waitLine(t, "op-1", "request", "")
			})
			if _, err := logtest.Parse(buf.String()); err != nil {
				t.Errorf("the log is not all %s lines: %v", format, err)
			}
		})
	}
}
