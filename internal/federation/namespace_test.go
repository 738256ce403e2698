package federation

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/httpx"
)

// The federation seen as one endpoint passes the suite every kind
// passes: a federation of one local directory behaves as the directory.
func TestNamespaceConformance(t *testing.T) {
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		dir := t.TempDir()
		tf := startFed(t, cfgYAML(slowHealth+"\nmetadata_cache: {ttl: 1ms, negative_ttl: 1ms}",
			"name: disk\nurl: file://"+dir+"\nwritable: true"))
		return endpointtest.Target{
			Endpoint: tf.Namespace(),
			Caps:     endpointtest.Caps{Checksums: []string{httpx.Adler32}},
		}
	})
}

// Open fails over mid-stream like the proxy, and its reader says which
// version it reads.
func TestNamespaceOpenFailover(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", data)
	b.put("/f", data)
	a.failAfter.Store(1<<20 + 17)
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("site-a", "priority: 1"), ep("site-b", "priority: 2")), a, b)
	ns := tf.Namespace()
	rc, err := ns.Open(t.Context(), "/f", 100, -1)
	if err != nil {
		t.Fatal(err)
	}
	ver, ok := endpoint.VersionOf(rc)
	if !ok || ver.Size != int64(len(data)) {
		t.Errorf("Version = %+v, %v; want the whole size %d", ver, ok, len(data))
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data[100:]) {
		t.Fatalf("read %d bytes, err %v; want %d identical bytes", len(got), err, len(data)-100)
	}
	if b.opens.Load() == 0 {
		t.Errorf("site-b never opened: no failover happened")
	}
}

// "Not found" only when every endpoint said so; an endpoint down makes
// it unavailable.
func TestNamespaceNotFoundVersusUnavailable(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	tf := startFed(t, cfgYAML(slowHealth, ep("site-a"), ep("site-b")), a, b)
	ns := tf.Namespace()
	if _, err := ns.Stat(t.Context(), "/missing"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	b.down.Store(true)
	if _, err := ns.Open(t.Context(), "/missing2", 0, -1); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Open with site-b down = %v, want ErrUnavailable", err)
	}
}

// Replicas that disagree (one changed behind the federation's back),
// ranked alike: every Stat through the namespace and every Open after it
// read one version while the entry lives, whichever way the ranking's
// shuffle of equals falls. A cache reading through the namespace would
// otherwise see its fills "changed" at every try, and never read the
// file.
func TestNamespaceStatAndOpenOneVersion(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/f", bytes.Repeat([]byte("a"), 3000))
	b.put("/f", bytes.Repeat([]byte("b"), 1000))
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("site-a", ""), ep("site-b", "")), a, b)
	ns := tf.Namespace()
	for i := range 40 {
		in, err := ns.Stat(t.Context(), "/f")
		if err != nil {
			t.Fatal(err)
		}
		rc, err := ns.Open(t.Context(), "/f", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != in.Size {
			t.Fatalf("try %d: Stat says %d bytes, Open read %d: two versions through one entry", i, in.Size, len(got))
		}
	}
}

// StatReplicas (the door's open for read) answers what Stat and
// Replicas answer, from one look-up: the Info of the first replica in
// the entry's order, even with replicas that disagree ranked alike, and
// every replica's URL; a directory has none; a missing path is
// ErrNotFound.
func TestNamespaceStatReplicas(t *testing.T) {
	a, b := newFake("site-a", true), newFake("site-b", true)
	a.put("/d/f", bytes.Repeat([]byte("a"), 3000))
	b.put("/d/f", bytes.Repeat([]byte("b"), 1000))
	b.put("/d/only-b", []byte("b"))
	tf := startFed(t, cfgYAML("mode: proxy\n"+slowHealth, ep("site-a", ""), ep("site-b", "")), a, b)
	ns := tf.Namespace()
	ctx := t.Context()
	urls := func(us []*url.URL) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.String())
		}
		slices.Sort(out)
		return out
	}
	for range 20 {
		for _, p := range []string{"/d/f", "/d/only-b", "/d"} {
			in, reps, err := ns.StatReplicas(ctx, p)
			if err != nil {
				t.Fatalf("StatReplicas(%s) = %v", p, err)
			}
			st, err := ns.Stat(ctx, p)
			if err != nil || !reflect.DeepEqual(in, st) {
				t.Errorf("StatReplicas(%s) says %+v; Stat says %+v, %v", p, in, st, err)
			}
			want, err := ns.Replicas(ctx, p)
			if in.IsDir {
				want = nil
			}
			if err != nil || !slices.Equal(urls(reps), urls(want)) {
				t.Errorf("StatReplicas(%s) replicas %q; Replicas %q, %v", p, urls(reps), urls(want), err)
			}
		}
	}
	if _, _, err := ns.StatReplicas(ctx, "/d/none"); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("StatReplicas(missing) = %v, want ErrNotFound", err)
	}
}
