package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/logging/logtest"
)

// TestNew: each format writes its own shape, and a line logged with a
// request's context carries its ID, also through With; a line without
// one does not.
func TestNew(t *testing.T) {
	ctx := httpx.WithRequestID(context.Background(), "3f9c2a7d10b4e6a8")
	for _, format := range []string{"", Text, JSON} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, format, nil)
			if err != nil {
				t.Fatal(err)
			}
			log.With("component", "storage").InfoContext(ctx, "request", "path", "/a b")
			log.Info("no request")
			log.DebugContext(ctx, "below the level")
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("logged %q, want 2 lines", buf.String())
			}
			if format == JSON {
				var m map[string]any
				if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
					t.Fatalf("json line %q: %v", lines[0], err)
				}
				if m[RequestIDKey] != "3f9c2a7d10b4e6a8" || m["component"] != "storage" || m["path"] != "/a b" {
					t.Errorf("json line = %v, want request_id, component and path", m)
				}
			} else if !strings.Contains(lines[0], "request_id=3f9c2a7d10b4e6a8") || !strings.Contains(lines[0], "component=storage") {
				t.Errorf("text line = %q, want request_id=3f9c2a7d10b4e6a8 and component=storage", lines[0])
			}
			if strings.Contains(lines[1], RequestIDKey) {
				t.Errorf("line without a request = %q, want no %s", lines[1], RequestIDKey)
			}
		})
	}
	if _, err := New(&bytes.Buffer{}, "xml", nil); err == nil {
		t.Error(`New(format "xml") succeeded, want an error`)
	}
}

// TestTaggedOnce: tagging a tagged logger does not repeat the key.
func TestTaggedOnce(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, Text, slog.LevelInfo)
	log = Tagged(Tagged(log))
	log.InfoContext(httpx.WithRequestID(context.Background(), "x1"), "m")
	if n := strings.Count(buf.String(), RequestIDKey); n != 1 {
		t.Errorf("logged %q: %s %d times, want once", buf.String(), RequestIDKey, n)
	}
	if Tagged(nil) == nil {
		t.Error("Tagged(nil) = nil, want the default logger, tagged")
	}
}

// TestLogtestReadsBothFormats: logtest reads back what New writes, in
// either format, quoted values included.
func TestLogtestReadsBothFormats(t *testing.T) {
	for _, format := range []string{Text, JSON} {
		var buf bytes.Buffer
		log, _ := New(&buf, format, nil)
		log.InfoContext(httpx.WithRequestID(context.Background(), "r-1"), "a request", "path", `/x "y" z=1`, "status", 200)
		lines, err := logtest.Parse(buf.String())
		if err != nil || len(lines) != 1 {
			t.Fatalf("%s: Parse(%q) = %v, %v", format, buf.String(), lines, err)
		}
		l, ok := logtest.Find(buf.String(), RequestIDKey, "r-1")
		if !ok || l["msg"] != "a request" || l["path"] != `/x "y" z=1` || l["status"] != "200" || l["level"] != "INFO" {
			t.Errorf("%s: Find = %v, %v; want the line with its msg, path, status and level", format, l, ok)
		}
	}
	if _, err := logtest.Parse("not a log line\n"); err == nil {
		t.Error("Parse of free text succeeded, want an error")
	}
}
