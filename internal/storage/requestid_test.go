package storage

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/logging/logtest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestRequestIDLogged: every answer of the storage role, from the fast
// path and from the handler, carries X-Request-ID (the client's when it is
// sane, else a fresh one), and the request's access log line carries the
// same ID, in both log formats.
func TestRequestIDLogged(t *testing.T) {
	tests := []struct {
		name    string
		req     string // request line and headers but Host and the end
		sent    string // X-Request-ID sent; "": none
		fresh   bool   // the answer's ID is a fresh one
		status  string
		path    string
		fastOne bool // the fast path answers it
	}{
		{"fast HEAD", "HEAD /f HTTP/1.1", "", true, "200", "/f", true},
		{"fast GET with an ID", "GET /f HTTP/1.1", "job-42.7", false, "200", "/f", true},
		{"fast 404", "GET /missing HTTP/1.1", "", true, "404", "/missing", true},
		{"fast, an ID with a space", "HEAD /f HTTP/1.1", "a b", true, "200", "/f", true},
		{"handler HEAD", "HEAD /f HTTP/1.1\r\n" + slowHeader + ": 1", "", true, "200", "/f", false},
		{"handler with an ID", "HEAD /f HTTP/1.1\r\n" + slowHeader + ": 1", "0f8fad5b-d9cb-469f-a165-70867728950e", false, "200", "/f", false},
		{"handler PROPFIND", "PROPFIND / HTTP/1.1\r\nDepth: 0", "pf-1", false, "207", "/", false},
	}
	for _, format := range []string{logging.Text, logging.JSON} {
		t.Run(format, func(t *testing.T) {
			var logBuf testenv.SyncBuffer
			log, err := logging.New(&logBuf, format, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(Config{Root: t.TempDir(), AccessLog: true}, log)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := os.WriteFile(filepath.Join(s.cfg.Root, "f"), []byte("12345"), 0o644); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx, ln) }()
			defer func() { cancel(); <-done }()
			ts := &testServer{s: s, host: ln.Addr().String()}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := fastCount(ts)
					rc := testenv.DialRaw(t, ts.host)
					head := tt.req + "\r\nHost: " + ts.host
					if tt.sent != "" {
						head += "\r\nX-Request-ID: " + tt.sent
					}
					rc.Send(head + "\r\n\r\n")
					method, _, _ := strings.Cut(tt.req, " ")
					resp, _ := rc.Read(method)
					id := resp.Header.Get("X-Request-ID")
					if tt.fresh && !freshID.MatchString(id) {
						t.Fatalf("X-Request-ID = %q, want a fresh one", id)
					}
					if !tt.fresh && id != tt.sent {
						t.Fatalf("X-Request-ID = %q, want the client's %q", id, tt.sent)
					}
					var line logtest.Line
					if !testenv.Within(5*time.Second, func() bool {
						var ok bool
						line, ok = logtest.Find(logBuf.String(), logging.RequestIDKey, id)
						return ok
					}) {
						t.Fatalf("no log line with request_id %s:\n%s", id, logBuf.String())
					}
					if line["msg"] != "request" || line["status"] != tt.status || line["path"] != tt.path || line["method"] != method {
						t.Errorf("log line = %v, want msg=request method=%s path=%s status=%s", line, method, tt.path, tt.status)
					}
					if fast := fastCount(ts) > before; fast != tt.fastOne {
						t.Errorf("answered by the fast path: %v, want %v", fast, tt.fastOne)
					}
				})
			}
			if _, err := logtest.Parse(logBuf.String()); err != nil {
				t.Errorf("the log is not all %s lines: %v", format, err)
			}
		})
	}
}
