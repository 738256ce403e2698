package server_test

import (
	"bytes"
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
