package storage

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/keptsum"
)

// TestKeptsumNames: the sidecars live under a reserved name (hidden from
// clients and listings) and are written through temp files the janitor
// removes after a crash.
func TestKeptsumNames(t *testing.T) {
	if !strings.HasPrefix(keptsum.Dir, reservedPrefix) {
		t.Errorf("keptsum.Dir = %q, want it to start with %q", keptsum.Dir, reservedPrefix)
	}
	if keptsum.TempPrefix != uploadPrefix {
		t.Errorf("keptsum.TempPrefix = %q, want the upload prefix %q", keptsum.TempPrefix, uploadPrefix)
	}
}

// sidecarOf returns the host path of the sidecar of the file at p.
func sidecarOf(t *testing.T, root, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, filepath.FromSlash(keptsum.Name(&st)))
}

// putKept PUTs name through the server (which keeps its adler32) and
// returns the host path of its sidecar.
func putKept(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	resp, body := ts.do(t, "PUT", "/"+name, strings.NewReader("payload of "+name))
	if resp.StatusCode != 201 && resp.StatusCode != 204 {
		t.Fatalf("PUT /%s = %d %q", name, resp.StatusCode, body)
	}
	sc := sidecarOf(t, ts.root, filepath.Join(ts.root, name))
	if _, err := os.Stat(sc); err != nil {
		t.Fatalf("PUT /%s kept no sidecar: %v", name, err)
	}
	return sc
}

// holdInode keeps the file at p open until the test ends, so that its
// inode, once unlinked, is not reused by a file a later case creates (the
// reused inode would take over the sidecar's name).
func holdInode(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// sweepAt runs one janitor pass as if it started at now.
func sweepAt(t *testing.T, ts *testServer, now time.Time) sweepResult {
	t.Helper()
	res, err := ts.s.sweepOnce(context.Background(), now, DefaultStaleUploadAge, time.Time{})
	if err != nil {
		t.Fatalf("sweepOnce = %v", err)
	}
	return res
}

// TestJanitorSidecars: the janitor removes the sidecar of a file that is
// gone (DELETE, or replaced from outside) and one whose fingerprint no
// longer matches its file, and keeps those of live files, hard links, and
// sidecars written during the pass.
func TestJanitorSidecars(t *testing.T) {
	ts := startServer(t, Config{})
	<-ts.s.swept // the start pass is over: the passes below are the only ones
	cases := []struct {
		name    string
		setup   func(t *testing.T) string // returns the sidecar's host path
		removed bool
	}{
		{"live file", func(t *testing.T) string { return putKept(t, ts, "live") }, false},
		{"live file deep down", func(t *testing.T) string { return putKept(t, ts, "a/b/c/deep") }, false},
		{"deleted by DELETE", func(t *testing.T) string {
			sc := putKept(t, ts, "gone")
			holdInode(t, filepath.Join(ts.root, "gone"))
			if resp, body := ts.do(t, "DELETE", "/gone", nil); resp.StatusCode != 204 {
				t.Fatalf("DELETE = %d %q", resp.StatusCode, body)
			}
			return sc
		}, true},
		{"replaced from outside by rename", func(t *testing.T) string {
			sc := putKept(t, ts, "replaced")
			holdInode(t, filepath.Join(ts.root, "replaced"))
			tmp := filepath.Join(ts.root, "replaced.new")
			if err := os.WriteFile(tmp, []byte("other"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(ts.root, "replaced")); err != nil {
				t.Fatal(err)
			}
			return sc
		}, true},
		{"rewritten in place", func(t *testing.T) string {
			sc := putKept(t, ts, "rewritten")
			p := filepath.Join(ts.root, "rewritten")
			fi, _ := os.Stat(p)
			if err := os.WriteFile(p, []byte("PAYLOAD OF REWRITTEN"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(p, fi.ModTime(), fi.ModTime())
			return sc
		}, true},
		{"hard link left after the first name went", func(t *testing.T) string {
			putKept(t, ts, "linked")
			if err := os.Link(filepath.Join(ts.root, "linked"), filepath.Join(ts.root, "link2")); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(ts.root, "linked")); err != nil {
				t.Fatal(err)
			}
			// Linking moved the ctime: keep a sum for the file as it is now.
			if resp, _ := ts.do(t, "HEAD", "/link2", nil, "Want-Digest", "adler32"); resp.StatusCode != 200 {
				t.Fatalf("HEAD /link2 = %d", resp.StatusCode)
			}
			return sidecarOf(t, ts.root, filepath.Join(ts.root, "link2"))
		}, false},
	}
	paths := make([]string, len(cases))
	for i, c := range cases {
		paths[i] = c.setup(t)
	}

	// A pass that began before these sidecars were written removes none
	// of the orphans: the walk might have missed their files.
	sweepAt(t, ts, time.Now().Add(-time.Minute))
	for i, c := range cases {
		if _, err := os.Stat(paths[i]); err != nil && c.name != "rewritten in place" {
			t.Errorf("%s: sidecar removed by a pass older than it: %v", c.name, err)
		}
	}

	res := sweepAt(t, ts, time.Now().Add(time.Minute))
	want := 0
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := os.Lstat(paths[i])
			if gone := os.IsNotExist(err); gone != c.removed {
				t.Errorf("sidecar %s removed = %v, want %v", filepath.Base(paths[i]), gone, c.removed)
			}
		})
		if c.removed && c.name != "rewritten in place" {
			want++ // the stale one went in the first pass already
		}
	}
	if res.sidecars != want {
		t.Errorf("second pass removed %d sidecars, want %d", res.sidecars, want)
	}
	// The live sums are still answered from the sidecars.
	if sum, ok := ts.s.cachedSum("adler32", statOf(t, filepath.Join(ts.root, "live"))); !ok || sum != adlerHex("payload of live") {
		t.Errorf("kept adler32 of live = %q, %v after the sweep; want %s", sum, ok, adlerHex("payload of live"))
	}
}

// TestJanitorSidecarsSinceLastPass: a later pass checks only the files
// changed since the last whole pass began, and that includes a file
// rewritten in place after it.
func TestJanitorSidecarsSinceLastPass(t *testing.T) {
	ts := startServer(t, Config{})
	<-ts.s.swept
	sc := putKept(t, ts, "f")
	first := time.Now()
	res, err := ts.s.sweepOnce(context.Background(), first, DefaultStaleUploadAge, time.Time{})
	if err != nil || !res.whole || res.sidecars != 0 {
		t.Fatalf("first pass = %+v, %v; want whole, nothing removed", res, err)
	}
	p := filepath.Join(ts.root, "f")
	fi, _ := os.Stat(p)
	if err := os.WriteFile(p, []byte("PAYLOAD OF F"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	res, err = ts.s.sweepOnce(context.Background(), time.Now(), DefaultStaleUploadAge, first)
	if err != nil || res.sidecars != 1 {
		t.Errorf("pass after the rewrite = %+v, %v; want the stale sidecar removed", res, err)
	}
	if _, err := os.Stat(sc); !os.IsNotExist(err) {
		t.Errorf("stale sidecar kept: %v", err)
	}
}

// TestJanitorSidecarsPartialWalk: a pass that did not see the whole tree
// (a directory below the depth limit) removes no orphaned sidecar; the
// next whole pass does.
func TestJanitorSidecarsPartialWalk(t *testing.T) {
	ts := startServer(t, Config{})
	<-ts.s.swept
	deep := ts.root
	for range janitorMaxDepth + 1 {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	sc := putKept(t, ts, "gone")
	if err := os.Remove(filepath.Join(ts.root, "gone")); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if res := sweepAt(t, ts, later); res.sidecars != 0 {
		t.Errorf("partial pass removed %d sidecars, want 0", res.sidecars)
	}
	if _, err := os.Stat(sc); err != nil {
		t.Errorf("partial pass removed the orphaned sidecar: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(ts.root, "d")); err != nil {
		t.Fatal(err)
	}
	if res := sweepAt(t, ts, later); res.sidecars != 1 {
		t.Errorf("whole pass removed %d sidecars, want 1", res.sidecars)
	}
	if _, err := os.Stat(sc); !os.IsNotExist(err) {
		t.Errorf("whole pass kept the orphaned sidecar: %v", err)
	}
}

func statOf(t *testing.T, p string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// BenchmarkJanitorPass measures one janitor pass over 20,000 files in 100
// directories: without kept sums, with one per file on a first pass
// (every sidecar's mtime looked at), and on a later pass (only files
// changed since the last whole pass are).
func BenchmarkJanitorPass(b *testing.B) {
	cases := []struct {
		name  string
		kept  bool
		first bool
	}{
		{"no sidecars", false, false},
		{"sidecar per file, first pass", true, true},
		{"sidecar per file, later pass", true, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			root := b.TempDir()
			s, err := New(Config{Root: root}, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			<-s.swept
			for i := range 20_000 {
				p := filepath.Join(root, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d", i))
				if i < 100 {
					os.Mkdir(filepath.Dir(p), 0o755)
				}
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					b.Fatal(err)
				}
				if c.kept {
					var st unix.Stat_t
					unix.Stat(p, &st)
					if err := s.storeSums(&st, map[string]string{"adler32": "00620062"}); err != nil {
						b.Fatal(err)
					}
				}
			}
			var checked time.Time
			if !c.first {
				checked = time.Now().Add(time.Second)
			}
			for b.Loop() {
				res, err := s.sweepOnce(context.Background(), time.Now(), time.Hour, checked)
				if err != nil || res.sidecars != 0 {
					b.Fatalf("sweepOnce = %+v, %v; want nothing removed", res, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20_000, "ns/file")
		})
	}
}
