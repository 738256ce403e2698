package posix

import (
	"context"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/endpointtest"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/storage"
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

// putViaStorage stores body as /name through a storage role serving root,
// which keeps its adler32 in a sidecar.
func putViaStorage(t *testing.T, root, name, body string) {
	t.Helper()
	s, err := storage.New(storage.Config{Root: root}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("PUT", "/"+name, strings.NewReader(body)))
	if rec.Code != 201 && rec.Code != 204 {
		t.Fatalf("storage PUT /%s = %d %q", name, rec.Code, rec.Body)
	}
}

// rewriteInPlace overwrites p with body (same size) and puts its mtime
// back, as touch -d or rsync -t do: size and mtime are what they were.
func rewriteInPlace(t *testing.T, p, body string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(body), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(p); err != nil || after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("rewrite changed size or mtime: %v, %v", after, err)
	}
}

func adlerHex(s string) string { return fmt.Sprintf("%08x", adler32.Checksum([]byte(s))) }

// TestKeptChecksum: a checksum the storage role kept in its sidecar is
// reported by Stat and Checksum while the file is unchanged; after a
// same-size rewrite in place with the mtime put back, neither returns the
// old sum. The old xattrs ("user.lakefed.<algo>" = "<hex> <size>
// <mtime-ns>"), whose fingerprint cannot see that rewrite, are not
// trusted at all.
func TestKeptChecksum(t *testing.T) {
	const before, after = "Wikipedia", "Wikipedie"
	cases := []struct {
		name    string
		keep    func(t *testing.T, root, p string) // keeps a sum for p
		wantHit bool                               // Stat reports the kept sum before the rewrite
	}{
		{"sidecar kept by the storage role", func(t *testing.T, root, p string) {
			putViaStorage(t, root, filepath.Base(p), before)
		}, true},
		{"legacy xattr", func(t *testing.T, root, p string) {
			if err := os.WriteFile(p, []byte(before), 0o644); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			v := adlerHex(before) + " " + strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
			if err := unix.Setxattr(p, "user.lakefed.adler32", []byte(v), 0); err != nil {
				t.Skipf("no user xattrs here: %v", err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, "f")
			c.keep(t, root, p)
			ep := newEP(t, root)
			ctx := context.Background()
			in, err := ep.Stat(ctx, "/f")
			if err != nil {
				t.Fatal(err)
			}
			if got, hit := in.Checksums[httpx.Adler32]; hit != c.wantHit || hit && got != adlerHex(before) {
				t.Errorf("Stat before the rewrite: adler32 = %q (reported %v), want reported %v with %s", got, hit, c.wantHit, adlerHex(before))
			}
			if got, err := ep.Checksum(ctx, "/f", httpx.Adler32); err != nil || got != adlerHex(before) {
				t.Errorf("Checksum before the rewrite = %q, %v; want %s", got, err, adlerHex(before))
			}
			rewriteInPlace(t, p, after)
			if in, err := ep.Stat(ctx, "/f"); err != nil || in.Checksums[httpx.Adler32] == adlerHex(before) {
				t.Errorf("Stat after the rewrite = %+v, %v; want no adler32 %s", in, err, adlerHex(before))
			}
			if got, err := ep.Checksum(ctx, "/f", httpx.Adler32); err != nil || got != adlerHex(after) {
				t.Errorf("Checksum after the rewrite = %q, %v; want %s", got, err, adlerHex(after))
			}
		})
	}
}

// TestChecksumKept: Checksum keeps what it computed in the root's
// sidecar, so Stat reports it; List hides the sidecar directory. A root
// below a storage role's root finds none of the storage role's sums and
// computes.
func TestChecksumKept(t *testing.T) {
	top := t.TempDir()
	putViaStorage(t, top, "sub/f", "payload")
	ep := newEP(t, filepath.Join(top, "sub"))
	ctx := context.Background()
	if in, err := ep.Stat(ctx, "/f"); err != nil || in.Checksums != nil {
		t.Errorf("Stat below the storage root = %+v, %v; want no checksums", in, err)
	}
	for _, algo := range []string{httpx.Adler32, httpx.MD5} {
		want := httpx.NewHash(algo)
		want.Write([]byte("payload"))
		if got, err := ep.Checksum(ctx, "/f", algo); err != nil || got != httpx.SumString(want) {
			t.Fatalf("Checksum(%s) = %q, %v; want %s", algo, got, err, httpx.SumString(want))
		}
		in, err := ep.Stat(ctx, "/f")
		if err != nil || in.Checksums[algo] != httpx.SumString(want) {
			t.Errorf("Stat after Checksum(%s) = %+v, %v; want it kept", algo, in, err)
		}
	}
	if _, err := os.Stat(filepath.Join(top, "sub", keptsum.Dir)); err != nil {
		t.Errorf("no sidecar directory in the endpoint root: %v", err)
	}
	list, err := ep.List(ctx, "/")
	if err != nil || len(list) != 1 || list[0].Name != "f" {
		t.Errorf("List(/) = %+v, %v; want only f", list, err)
	}
}

// TestStrongVersions: a local file's version names its bytes. Replaced
// by a file of the same size with its modification time put back (cp -p,
// by rename, and by a rewrite in place), its ETag changes; an open of it
// reports the version Stat gave (endpoint.SameBytes).
func TestStrongVersions(t *testing.T) {
	dir := t.TempDir()
	ep := newEP(t, dir)
	p := filepath.Join(dir, "f")
	mtime := time.Unix(1700000000, 0)
	put := func(data string, inPlace bool) endpoint.Info {
		t.Helper()
		target := p
		if !inPlace {
			target = p + ".tmp"
		}
		if err := os.WriteFile(target, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(target, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if !inPlace {
			if err := os.Rename(target, p); err != nil {
				t.Fatal(err)
			}
		}
		in, err := ep.Stat(t.Context(), "/f")
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	v1 := put("aaaa", false)
	v2 := put("bbbb", false)
	v3 := put("cccc", true)
	for _, in := range []endpoint.Info{v1, v2, v3} {
		if !in.Strong || in.ETag == "" {
			t.Fatalf("Stat = %+v, want a strong ETag", in)
		}
	}
	if endpoint.SameVersion(v1, v2) || endpoint.SameVersion(v2, v3) {
		t.Errorf("ETags %q, %q, %q: a replaced file keeps its version", v1.ETag, v2.ETag, v3.ETag)
	}
	rc, err := ep.Open(t.Context(), "/f", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if ver, ok := endpoint.VersionOf(rc); !ok || !endpoint.SameBytes(v3, ver) {
		t.Errorf("Open: version %+v, want the one Stat gave, %+v", ver, v3)
	}
	if ep.Validators() != endpoint.ValidatorsStrong {
		t.Errorf("Validators = %q", ep.Validators())
	}
}
