package buffer

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/testenv"
)

// rot flips one byte in the middle of the spool file of p's current
// version, as a failing disk would.
func rot(t *testing.T, b *Buffer, p string) {
	t.Helper()
	b.mu.Lock()
	e := b.cur[p]
	b.mu.Unlock()
	if e == nil {
		t.Fatalf("the buffer holds no %s", p)
	}
	f, err := os.OpenFile(b.spoolPath(e), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	one := make([]byte, 1)
	if _, err := f.ReadAt(one, e.size/2); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x20
	if _, err := f.WriteAt(one, e.size/2); err != nil {
		t.Fatal(err)
	}
}

// getWhole GETs url and reports the status, the body and whether the body
// came whole (its read ended without an error).
func getWhole(t *testing.T, url string) (int, []byte, bool) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, body, err == nil
}

// TestDamagedSpool: a pending file whose spool copy rotted on the local
// disk is neither served nor migrated, and is reported. A whole GET is cut
// short before its last bytes (the client sees a broken body, not a
// complete wrong file), later reads are refused with 500, the mover
// sends none of it (a target would keep the wrong bytes under the right
// name), and Status, the journal and the failures metric say why.
// Healthy files around it migrate.
func TestDamagedSpool(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	gated := &fake{Endpoint: disk, gate: make(chan struct{})}
	reg := prometheus.NewRegistry()
	b, srv := start(t, fastRetry(Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{gated}}}}), nil, Options{Registerer: reg})
	r := rand.New(rand.NewPCG(4, 4))
	read, moved := randBytes(r, 300<<10), randBytes(r, 300<<10)
	for p, data := range map[string][]byte{"/read": read, "/moved": moved, "/healthy": []byte("healthy")} {
		if resp := put(t, srv.URL+p, data); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d", p, resp.StatusCode)
		}
	}
	rot(t, b, "/read")
	rot(t, b, "/moved")

	// A range is not checked (it would cost a whole read), a whole read is.
	if resp, body := get(t, srv.URL+"/read", "Range", "bytes=0-99"); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, read[:100]) {
		t.Errorf("ranged GET of the damaged file's intact start = %d, %d bytes", resp.StatusCode, len(body))
	}
	if code, body, whole := getWhole(t, srv.URL+"/read"); code == http.StatusOK && whole {
		t.Errorf("GET of a damaged spool file = 200 with %d bytes, whole: served as is", len(body))
	}
	if code, _, _ := getWhole(t, srv.URL+"/read"); code != http.StatusInternalServerError {
		t.Errorf("GET of a spool file known damaged = %d, want 500", code)
	}

	close(gated.gate)
	testenv.Eventually(t, 10*time.Second, "the healthy file did not migrate, or the damage found by the mover was not reported", func() bool {
		st := b.Status()
		return st.PendingFiles == 2 && len(st.Failures) == 2
	})
	for _, fl := range b.Status().Failures {
		if fl.Reason != reasonDamaged || fl.Target != "buffer" || fl.Error == "" {
			t.Errorf("failure %+v, want reason %s on target buffer", fl, reasonDamaged)
		}
	}
	if n := counter(t, reg, "lakefed_buffer_failures_total", map[string]string{"reason": reasonDamaged}); n != 2 {
		t.Errorf("failures_total{reason=%s} = %v, want 2", reasonDamaged, n)
	}
	for _, p := range []string{"read", "moved"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("the damaged %s reached the target (%v)", p, err)
		}
	}
	if got := readFile(t, dir, "/healthy"); string(got) != "healthy" {
		t.Errorf("target holds %q", got)
	}
	// The journal keeps the reason across a restart. It is written just
	// after the failure shows in Status (the finder journals it).
	testenv.Eventually(t, 10*time.Second, "the journal rows of the damaged files record their error", func() bool {
		rows, err := b.j.load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range rows {
			if e.path != "/healthy" && e.lastErr == "" {
				return false
			}
		}
		return true
	})
}

// TestDamagedMigratedSpool: a migrated file kept for local reads whose
// spool copy rotted is retired as soon as a whole read finds it: the
// targets hold verified copies, and the next read gets one.
func TestDamagedMigratedSpool(t *testing.T) {
	disk, dir := newPosix(t, "disk")
	b, srv := start(t, fastRetry(Config{KeepAfterMigration: time.Hour, Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}),
		http.FileServer(http.Dir(dir)), Options{})
	data := randBytes(rand.New(rand.NewPCG(5, 5)), 200<<10)
	put(t, srv.URL+"/f", data)
	testenv.Eventually(t, 10*time.Second, "not migrated", func() bool { st := b.Status(); return st.PendingFiles == 0 && st.HeldFiles == 1 })
	rot(t, b, "/f")
	if code, body, whole := getWhole(t, srv.URL+"/f"); code == http.StatusOK && whole && !bytes.Equal(body, data) {
		t.Fatalf("GET of a damaged kept copy = 200 with the damaged bytes, whole")
	}
	if st := b.Status(); st.HeldFiles != 0 {
		t.Errorf("Status after the damage was found = %+v, want the copy retired", st)
	}
	if code, body, whole := getWhole(t, srv.URL+"/f"); code != http.StatusOK || !whole || !bytes.Equal(body, data) {
		t.Errorf("GET once retired = %d, %d bytes (whole %v), want the target's copy", code, len(body), whole)
	}
}
