package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/buffer"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/results"
	"github.com/lakefed/lakefed/internal/testenv"
)

// corrupting is a target that stores every file with its first byte
// flipped, and hides the posix endpoint's checksums, so the buffer reads
// each copy back and finds it wrong.
type corrupting struct{ endpoint.Endpoint }

func (c corrupting) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(data) > 0 {
		data[0] ^= 0xff
	}
	return c.Endpoint.Put(ctx, p, bytes.NewReader(data), size)
}

// TestBrowserBuffer runs a real write buffer with three targets: a
// directory (site-a) that takes every copy, a storage URL whose server is
// down (cloud: refused connections), and one that corrupts what it
// stores (tape). Files are written under a prefix migrating to site-a
// alone, and under prefixes that also go to cloud and tape; the mover
// runs until site-a has verified its files and both others have failed.
// Once Run has taken its second sample (it samples every 10 s) and one
// more file is written, /ui/buffer in headless Chromium at 1400 px wide
// shows the pending figures, the plot with a point per sample and one
// for now, both failures with their reasons, nothing overflows, and the
// screenshot ($TMPDIR/lakefed-ui/buffer.png) is not blank.
func TestBrowserBuffer(t *testing.T) {
	chromium := testenv.Require(t, "chromium")
	ctx := t.Context()
	siteDir, tapeDir := t.TempDir(), t.TempDir()
	siteA, err := posix.New(ctx, endpoint.Config{Name: "site-a", URL: "file://" + siteDir}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	tapeEP, err := posix.New(ctx, endpoint.Config{Name: "tape", URL: "file://" + tapeDir}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String() + "/"
	dead.Close() // a storage server that is down: connections refused
	cloud, err := kinds.New(ctx, endpoint.Config{Name: "cloud", URL: deadURL, Timeout: 2 * time.Second}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	tape := corrupting{tapeEP}

	b, err := buffer.New(ctx, buffer.Config{Dir: t.TempDir(), MaxBytes: 64 << 20, Parallel: 4,
		RetryInitial: 200 * time.Millisecond, RetryMax: 2 * time.Second,
		Prefixes: []buffer.Prefix{
			{Prefix: "/store/fast", Targets: []endpoint.Endpoint{siteA}},
			{Prefix: "/store/user", Targets: []endpoint.Endpoint{siteA, cloud}},
			{Prefix: "/store/archive", Targets: []endpoint.Endpoint{siteA, tape}},
		}}, buffer.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	front := serve(t, b.Wrap(http.NotFoundHandler()))
	r := rand.New(rand.NewPCG(3, 4))
	put := func(p string, n int) {
		t.Helper()
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, front+p, bytes.NewReader(data))
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
	for i := range 6 {
		put(fmt.Sprintf("/store/fast/run%d.root", i), (1+i)<<19)
	}
	for i := range 4 {
		put(fmt.Sprintf("/store/user/out%d.root", i), 2<<20)
	}
	put("/store/archive/raw.dat", 3<<20)
	// Run samples the pending bytes as it starts: all 11 files.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	reasons := func(st buffer.Status) map[string]bool {
		m := map[string]bool{}
		for _, f := range st.Failures {
			m[f.Target+" "+f.Reason] = true
		}
		return m
	}
	start := time.Now()
	var bst buffer.Status
	if !testenv.Within(30*time.Second, func() bool {
		bst = b.Status()
		rs := reasons(bst)
		return bst.Migrated == 6 && bst.PendingFiles == 5 && rs["cloud unavailable"] && rs["tape verify_adler32"]
	}) {
		t.Fatalf("the buffer did not reach 6 migrated, 5 failing files: %+v", bst)
	}
	// Run samples every 10 s: the second sample sees site-a's share
	// gone, 5 files left.
	if !testenv.Within(30*time.Second-time.Since(start), func() bool { return len(b.History()) >= 2 }) {
		t.Fatalf("History() = %+v after 30 s, want two samples", b.History())
	}
	if h := b.History(); h[0].PendingFiles != 11 || h[1].PendingFiles != 5 {
		t.Fatalf("History() = %+v, want samples of 11 and then 5 pending files", h)
	}
	// Written after the samples, while cloud is down: pending now is 6
	// files, the plot's last point.
	put("/store/user/late.root", 4<<20)

	st, err := results.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dash := New(Options{Store: st, Buffer: b, Log: quiet})
	mux := http.NewServeMux()
	mux.Handle("/ui/", withLayoutCheck(dash))
	base := serve(t, mux)

	dom := runChromium(t, chromium, "--window-size=1400,1400", "--dump-dom", base+checkURL("/ui/buffer"))
	// A point per sample and one for now.
	if n, h := domPoints(dom)[plotPending], len(b.History()); n != h+1 {
		t.Errorf("/ui/buffer in Chromium: the plot has %d points, want %d", n, h+1)
	}
	for _, w := range []string{">6 files<", "6 files acknowledged", `badge warn">unavailable`, `badge warn">verify_adler32`,
		"/store/user/out0.root", "/store/archive/raw.dat", "site-a", "of 64 MiB (max_bytes)", "MB/s",
		"failing for 1 file"} {
		if !strings.Contains(dom, w) {
			t.Errorf("/ui/buffer in Chromium: no %q", w)
		}
	}
	checkLayout(t, "/ui/buffer", dom)

	shots := filepath.Join(os.TempDir(), "lakefed-ui")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(shots, "buffer.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1400,1400", "--hide-scrollbars", base+"/ui/buffer")
	t.Logf("screenshot of /ui/buffer: %s", shot)
	checkNotBlank(t, shot)
}
