package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot"
)

// TestXrootKind points lakefed's own root:// client (the xroot endpoint
// kind: go-hep's client plus xrdwire, what `lakefed cp` and bench use)
// at the door, direct and through a redirect.
func TestXrootKind(t *testing.T) {
	ctx := context.Background()
	data := payload(5<<20+9, 60)
	dns := newFakeNS()
	dns.set("/s/f", data)
	ds, daddr := startDoor(t, dns, Options{})
	ns := newFakeNS()
	ns.set("/s/f", data)
	ns.set("/s/local", data[:1000])
	ns.replicas["/s/f"] = []*url.URL{{Scheme: "root", Host: daddr, Path: "//s/f"}}
	s, addr := startDoor(t, ns, Options{})

	ep, err := xroot.New(ctx, endpoint.Config{Name: "door", URL: "root://" + addr + "//"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()

	if info, err := ep.Stat(ctx, "/s/f"); err != nil || info.Size != int64(len(data)) {
		t.Fatalf("Stat = %+v, %v; want size %d", info, err, len(data))
	}
	if _, err := ep.Stat(ctx, "/s/none"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat of a missing file = %v, want ErrNotFound", err)
	}
	list, err := ep.List(ctx, "/s")
	if err != nil || len(list) != 2 {
		t.Errorf("List = %v, %v; want 2 entries", list, err)
	}
	for _, p := range []string{"/s/f", "/s/local"} {
		rc, err := ep.Open(ctx, p, 0, -1)
		if err != nil {
			t.Fatalf("Open %s: %v", p, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		want, _ := ns.get(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %s: %d bytes, %v; want %d", p, len(got), err, len(want))
		}
	}
	if s.Stats().Redirects == 0 || ds.Stats().Opens == 0 {
		t.Errorf("the read of /s/f was not redirected: door %+v, data server %+v", s.Stats(), ds.Stats())
	}
	if sum, err := ep.Checksum(ctx, "/s/local", "adler32"); err != nil || sum != adler(data[:1000]) {
		t.Errorf("Checksum = %q, %v; want %s", sum, err, adler(data[:1000]))
	}
	up := payload(3<<20, 61)
	if err := ep.Put(ctx, "/s/up", bytes.NewReader(up), int64(len(up))); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, _ := ns.get("/s/up"); !bytes.Equal(got, up) {
		t.Errorf("Put stored %d bytes, want %d", len(got), len(up))
	}
	// Its temporary name was held for the rename, never stored.
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for p := range ns.files {
		if strings.Contains(p, ".lakefed-") {
			t.Errorf("temporary upload %s is visible", p)
		}
	}
}

func TestIsHeldName(t *testing.T) {
	for p, want := range map[string]bool{
		"/a/.f.root.lakefed-0123456789abcdef":  true,
		"/.x.lakefed-ffffffffffffffff":         true,
		"/a/f.root.lakefed-0123456789abcdef":   false, // not hidden
		"/a/.f.root.lakefed-0123456789abcdeg":  false,
		"/a/.f.root.lakefed-0123456789abcde":   false,
		"/a/..lakefed-0123456789abcdef":        false,
		"/a/.f.root.lakefed-0123456789abcdef0": false,
	} {
		if got := isHeldName(p); got != want {
			t.Errorf("isHeldName(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestXrootKindStatListRefusesDoor: the door is a load balancer (its
// handshake says so): its listing is its namespace's, merged across
// endpoints, and its Stat is its first replica's, so the xroot kind's
// StatList refuses it (ErrUnsupported: the federator asks Stat) and
// does not ask again; its List still lists.
func TestXrootKindStatListRefusesDoor(t *testing.T) {
	ctx := context.Background()
	dir, addr := startPosixDoor(t)
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d", "a.root"), payload(1000, 62), 0o644); err != nil {
		t.Fatal(err)
	}
	ep, err := xroot.New(ctx, endpoint.Config{Name: "door", URL: "root://" + addr + "//"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	for range 2 {
		if files, unsure, err := ep.StatList(ctx, "/d", 10); !errors.Is(err, endpoint.ErrUnsupported) || files != nil || unsure != nil {
			t.Fatalf("StatList of a door = %d files, %q, %v; want ErrUnsupported", len(files), unsure, err)
		}
	}
	ents, err := ep.List(ctx, "/d")
	if err != nil || len(ents) != 1 || ents[0].Name != "a.root" {
		t.Errorf("List of a door = %+v, %v; want a.root", ents, err)
	}
}

// bothNS is a fakeNS that also answers StatReplicas, and counts which
// of its look-ups the door asks.
type bothNS struct {
	*fakeNS
	nStat, nReplicas, nBoth atomic.Int64
}

func (n *bothNS) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	n.nStat.Add(1)
	return n.fakeNS.Stat(ctx, p)
}

func (n *bothNS) Replicas(ctx context.Context, p string) ([]*url.URL, error) {
	n.nReplicas.Add(1)
	return n.fakeNS.Replicas(ctx, p)
}

func (n *bothNS) StatReplicas(ctx context.Context, p string) (endpoint.Info, []*url.URL, error) {
	n.nBoth.Add(1)
	info, err := n.fakeNS.Stat(ctx, p)
	if err != nil || info.IsDir {
		return info, nil, err
	}
	reps, err := n.fakeNS.Replicas(ctx, p)
	return info, reps, err
}

// TestOpenAsksOneLookUp: a namespace that is a ReplicaStater (the
// federator's) is asked once per open for read, not a Stat and then
// Replicas; the answers are the same: a redirect for a file with a
// root:// replica, a handle for one without, kXR_isDirectory for a
// directory, kXR_NotFound for nothing. An open for write still asks
// Stat.
func TestOpenAsksOneLookUp(t *testing.T) {
	ns := &bothNS{fakeNS: newFakeNS()}
	ns.set("/s/f", []byte("far"))
	ns.set("/s/here", []byte("here"))
	ns.fakeNS.replicas["/s/f"] = []*url.URL{{Scheme: "root", Host: "192.0.2.1:1094", Path: "//s/f"}}
	_, addr := startDoor(t, ns, Options{})
	rc := dialRaw(t, addr)
	for _, tc := range []struct {
		p    string
		want int // response status
	}{
		{"/s/f", 4004},    // kXR_redirect
		{"/s/here", 0},    // kXR_ok: served by the door
		{"/s", 4003},      // kXR_error: a directory
		{"/s/none", 4003}, // kXR_error: not found
	} {
		st, body := rc.answer(rc.request(3010, binary.BigEndian.AppendUint16(make([]byte, 2), 0x0010), []byte(tc.p)))
		if st != tc.want {
			t.Errorf("open %s = status %d %q, want %d", tc.p, st, body, tc.want)
		}
		if tc.p == "/s/f" && !strings.Contains(string(body), "192.0.2.1") {
			t.Errorf("open %s redirected to %q, want the replica's host", tc.p, body)
		}
	}
	if s, r, b := ns.nStat.Load(), ns.nReplicas.Load(), ns.nBoth.Load(); s != 0 || r != 0 || b != 4 {
		t.Errorf("four opens for read asked Stat %d, Replicas %d, StatReplicas %d times; want 0, 0, 4", s, r, b)
	}
}
