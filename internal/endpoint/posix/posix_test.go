package posix

import (
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/httpx"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newEP(t *testing.T, dir string) *Endpoint {
	t.Helper()
	ep, err := New(context.Background(), endpoint.Config{Name: "disk", URL: "file://" + dir}, quiet)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return ep
}

func TestConformance(t *testing.T) {
	endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
		return endpointtest.Target{
			Endpoint: newEP(t, t.TempDir()),
			Caps:     endpointtest.Caps{Checksums: []string{httpx.Adler32, httpx.MD5, httpx.CRC32C}},
		}
	})
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"file://relative/dir", "file:" + "rel", "http://x/", "file://host/" + dir, "file://" + file, "file://" + dir + "/missing", "file://" + dir + "?q=1"} {
		if _, err := New(context.Background(), endpoint.Config{Name: "x", URL: u}, quiet); err == nil {
			t.Errorf("New(%q) = nil error, want one", u)
		}
	}
	if _, err := New(context.Background(), endpoint.Config{URL: "file://" + dir}, quiet); err == nil {
		t.Errorf("New without a name = nil error")
	}
}

// TestSymlinkEscape checks that links out of the root are refused for
// every operation and that nothing outside changes.
func TestSymlinkEscape(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(root, "outdir")))
	must(os.Symlink(secret, filepath.Join(root, "outfile")))
	must(os.Symlink("../outside/secret", filepath.Join(root, "relout")))
	must(os.WriteFile(filepath.Join(root, "in"), []byte("inside"), 0o644))
	must(os.Symlink("in", filepath.Join(root, "inlink")))
	ep := newEP(t, root)
	ctx := context.Background()

	for _, p := range []string{"/outdir", "/outdir/secret", "/outfile", "/relout", "/outdir/new", "/outdir/a/b"} {
		if _, err := ep.Stat(ctx, p); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Stat(%q) = %v, want ErrRefused", p, err)
		}
		if rc, err := ep.Open(ctx, p, 0, -1); !errors.Is(err, endpoint.ErrRefused) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Open(%q) = %v, want ErrRefused", p, err)
		}
		if _, err := ep.List(ctx, p); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("List(%q) = %v, want ErrRefused", p, err)
		}
		if _, err := ep.Checksum(ctx, p, "adler32"); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Checksum(%q) = %v, want ErrRefused", p, err)
		}
	}
	for _, p := range []string{"/outdir/secret", "/outdir/new", "/outdir/a/b"} {
		if err := ep.Put(ctx, p, strings.NewReader("pwned"), 5); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Put(%q) = %v, want ErrRefused", p, err)
		}
		if err := ep.Mkdir(ctx, p); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Mkdir(%q) = %v, want ErrRefused", p, err)
		}
		if err := ep.Delete(ctx, p); !errors.Is(err, endpoint.ErrRefused) {
			t.Errorf("Delete(%q) = %v, want ErrRefused", p, err)
		}
	}
	// Deleting the link itself is fine and leaves its target alone.
	if err := ep.Delete(ctx, "/outfile"); err != nil {
		t.Errorf("Delete(/outfile) = %v, want nil (removes the link)", err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "SECRET" {
		t.Errorf("the file outside the root is %q, %v after the attacks", b, err)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("outside dir has %d entries after the attacks, want 1", len(ents))
	}
	// A link inside the root works, and List hides escaping links.
	if in, err := ep.Stat(ctx, "/inlink"); err != nil || in.Size != 6 {
		t.Errorf("Stat(/inlink) = %+v, %v, want size 6", in, err)
	}
	list, err := ep.List(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Name == "outdir" || e.Name == "relout" {
			t.Errorf("List(/) shows %q, which leads outside the root", e.Name)
		}
	}
}

// TestPutLeavesNoTemp checks that a failed Put removes its temporary file
// and that listings hide another writer's temporary files.
func TestPutLeavesNoTemp(t *testing.T) {
	root := t.TempDir()
	ep := newEP(t, root)
	ctx := context.Background()
	if err := ep.Put(ctx, "/d/f", strings.NewReader("abc"), 10); err == nil {
		t.Fatalf("Put with a short reader = nil")
	}
	ents, err := os.ReadDir(filepath.Join(root, "d"))
	if err != nil || len(ents) != 0 {
		t.Errorf("after a failed Put the dir holds %v, %v; want nothing", ents, err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", TempPrefix+"123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := ep.List(ctx, "/d")
	if err != nil || len(list) != 0 {
		t.Errorf("List shows %v, %v; want temp files hidden", list, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := ep.Put(cctx, "/d/g", strings.NewReader("abc"), 3); !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("Put with a cancelled ctx = %v, want ErrUnavailable", err)
	}
}

// TestCachedChecksum checks that a checksum cached by the storage role is
// used while the file is unchanged and ignored once it changes.
func TestCachedChecksum(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "f")
	if err := os.WriteFile(p, []byte("Wikipedia"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	// A deliberately wrong value proves the cache, not the file, answered.
	v := "deadbeef " + strconv.FormatInt(st.Size, 10) + " " + strconv.FormatInt(st.Mtim.Nano(), 10)
	if err := unix.Setxattr(p, sumXattrPrefix+"adler32", []byte(v), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	ep := newEP(t, root)
	ctx := context.Background()
	if got, err := ep.Checksum(ctx, "/f", "adler32"); err != nil || got != "deadbeef" {
		t.Errorf("Checksum with a matching cache = %q, %v; want deadbeef", got, err)
	}
	if in, err := ep.Stat(ctx, "/f"); err != nil || in.Checksums["adler32"] != "deadbeef" {
		t.Errorf("Stat with a matching cache = %+v, %v; want adler32 deadbeef", in, err)
	}
	// Change the file (same size, new mtime): the cache must be ignored.
	if err := os.WriteFile(p, []byte("Wikipedib"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime().Add(time.Second), fi.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%08x", adler32.Checksum([]byte("Wikipedib")))
	if got, err := ep.Checksum(ctx, "/f", "adler32"); err != nil || got != want {
		t.Errorf("Checksum after a change = %q, %v; want %s", got, err, want)
	}
	if in, err := ep.Stat(ctx, "/f"); err != nil || in.Checksums != nil {
		t.Errorf("Stat after a change = %+v, %v; want no checksums", in, err)
	}
}
