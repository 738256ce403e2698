package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// One process runs a write buffer and a cache on the federator's
// listener: a file written through the buffer is read back through the
// cache while it is pending, after it migrated, and after it was
// overwritten, always the newest bytes.
func TestBufferAndCacheInOneProcess(t *testing.T) {
	fed := servertest.Start(t, servertest.Options{Sites: 2, Log: testLog(), Configure: func(c *config.Config) {
		c.Buffer = &config.Buffer{Dir: t.TempDir(), KeepAfterMigration: config.Duration(time.Millisecond),
			Retry:    config.Retry{Initial: config.Duration(50 * time.Millisecond), Max: config.Duration(time.Second)},
			Prefixes: []config.BufferPrefix{{Prefix: "/out", Targets: []string{"site-b"}}}}
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation}
	}})
	put := func(data []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, fed.URL+"/out/run1/f.root", bytes.NewReader(data))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 && resp.StatusCode != 204 || resp.Header.Get("Digest") == "" {
			t.Fatalf("PUT = %d, Digest %q", resp.StatusCode, resp.Header.Get("Digest"))
		}
	}
	get := func(want []byte, when string) {
		t.Helper()
		resp, err := http.Get(fed.URL + "/out/run1/f.root")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, want) {
			t.Fatalf("%s: GET = %d, %d bytes; want the %d bytes written", when, resp.StatusCode, len(got), len(want))
		}
	}
	v1 := bytes.Repeat([]byte("version one "), 50000)
	put(v1)
	get(v1, "pending")
	waitMigrated(t, fed.URL)
	if b, err := os.ReadFile(filepath.Join(fed.Sites[1].Dir, "out", "run1", "f.root")); err != nil || !bytes.Equal(b, v1) {
		t.Fatalf("site-b holds %d bytes (%v) after migration", len(b), err)
	}
	get(v1, "migrated")
	v2 := bytes.Repeat([]byte("version two!"), 60000)
	put(v2)
	waitMigrated(t, fed.URL)
	get(v2, "overwritten, migrated")
}

func waitMigrated(t *testing.T, base string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "the buffer migrated and retired", func() bool {
		resp, err := http.Get(base + "/api/buffer")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			PendingFiles int `json:"pending_files"`
			HeldFiles    int `json:"held_files"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return st.PendingFiles == 0 && st.HeldFiles == 0
	})
}

func testLog() *slog.Logger {
	if os.Getenv("LAKEFED_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}
