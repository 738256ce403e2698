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
	if code, b := read("before the door's rm"); code != 200 || !bytes.Equal(b, v2) {
		t.Fatalf("read through the cache before rm = %d, %d bytes; want v2, cached", code, len(b))
	}
	if b, err := exec.Command(xrdfs, strings.TrimPrefix(door, "root://"), "rm", "/f").CombinedOutput(); err != nil {
		t.Fatalf("xrdfs rm at the door: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(fed.Sites[0].Dir, "f")); !os.IsNotExist(err) {
		t.Fatalf("after xrdfs rm the file is still on the site: %v", err)
	}
	if code, b := read("after the door's rm"); code != 404 {
		t.Fatalf("read through the cache after rm at the door = %d (%d bytes, v2: %v), want 404", code, len(b), bytes.Equal(b, v2))
	}
}

// With a write buffer in the process the door serves the buffer's view
// of the federation, and the federation's namespace operations where
// the buffer has no say: a rename outside the buffered prefix is done on
// the site, one under it is refused (a buffered file may not have
// reached its endpoint, and its migration would undo the rename), and
// rmdir sees buffered files.
func TestBufferedDoorNamespace(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	xrdcp := testenv.Require(t, "xrdcp")
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.Buffer = &config.Buffer{Dir: t.TempDir(), Retry: config.Retry{Initial: config.Duration(time.Hour), Max: config.Duration(time.Hour)},
			Prefixes: []config.BufferPrefix{{Prefix: "/out", Targets: []string{"site-a"}}}}
	}})
	site := fed.Sites[0].Dir
	os.MkdirAll(filepath.Join(site, "in"), 0o755)
	if err := os.WriteFile(filepath.Join(site, "in", "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	door := strings.TrimPrefix(fed.Server.XrootURL(), "root://")
	xfs := func(args ...string) (string, error) {
		b, err := exec.Command(xrdfs, append([]string{door}, args...)...).CombinedOutput()
		return string(b), err
	}
	if out, err := xfs("mv", "/in/a", "/in/b"); err != nil {
		t.Fatalf("xrdfs mv outside the buffer: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(site, "in", "b")); err != nil {
		t.Errorf("after mv /in/a /in/b the site has no in/b: %v", err)
	}
	src := filepath.Join(t.TempDir(), "x")
	os.WriteFile(src, []byte("buffered"), 0o644)
	if b, err := exec.Command(xrdcp, "-s", src, "root://"+door+"//out/d/x").CombinedOutput(); err != nil {
		t.Fatalf("xrdcp into the buffer: %v\n%s", err, b)
	}
	out, err := xfs("mv", "/out/d/x", "/out/d/y")
	if err == nil || !strings.Contains(out, "[3013]") || !strings.Contains(out, "write buffer") {
		t.Errorf("xrdfs mv under the buffered prefix = %v\n%s\nwant kXR_Unsupported naming the write buffer", err, out)
	}
	out, err = xfs("rmdir", "/out/d")
	if err == nil || !strings.Contains(out, "[3018]") {
		t.Errorf("xrdfs rmdir of a directory holding a buffered file = %v\n%s\nwant kXR_ItExists", err, out)
	}
	if out, err := xfs("stat", "/out/d/x"); err != nil {
		t.Errorf("the buffered file after the refused mv and rmdir: %v\n%s", err, out)
	}
}

// A directory moved through the door leaves the cache of the process
// with every path below it: the old names are 404 at once, the new ones
// read.
func TestDoorMoveSeenByCache(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	fed := servertest.Start(t, servertest.Options{Sites: 1, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.Cache = &config.Cache{Dir: t.TempDir(), Origin: config.OriginFederation, RevalidateAfter: config.Duration(time.Hour)}
	}})
	data := bytes.Repeat([]byte("moved "), 50000)
	os.MkdirAll(filepath.Join(fed.Sites[0].Dir, "d", "sub"), 0o755)
	if err := os.WriteFile(filepath.Join(fed.Sites[0].Dir, "d", "sub", "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(fed.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := read("/d/sub/f"); code != 200 || !bytes.Equal(b, data) {
		t.Fatalf("first read = %d, %d bytes", code, len(b))
	}
	door := strings.TrimPrefix(fed.Server.XrootURL(), "root://")
	if b, err := exec.Command(xrdfs, door, "mv", "/d", "/e").CombinedOutput(); err != nil {
		t.Fatalf("xrdfs mv /d /e: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(fed.Sites[0].Dir, "e", "sub", "f")); err != nil {
		t.Fatalf("after xrdfs mv the site has no e/sub/f: %v", err)
	}
	if code, b := read("/d/sub/f"); code != 404 {
		t.Errorf("read of the old name through the cache after mv = %d (%d bytes), want 404", code, len(b))
	}
	if code, b := read("/e/sub/f"); code != 200 || !bytes.Equal(b, data) {
		t.Errorf("read of the new name = %d, %d bytes", code, len(b))
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
