package storage

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// writeAged writes a file under root with its mtime set to age ago.
func writeAged(t testing.TB, root, name string, age time.Duration) string {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("partial upload"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt := time.Now().Add(-age)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	return p
}

// agedTree makes the directory name under root holding sub/f, with every
// mtime set to age ago but f's, set to leafAge ago.
func agedTree(t testing.TB, root, name string, age, leafAge time.Duration) string {
	t.Helper()
	dir := filepath.Join(root, name)
	writeAged(t, dir, "sub/f", leafAge)
	mt := time.Now().Add(-age)
	for _, d := range []string{filepath.Join(dir, "sub"), dir} {
		if err := os.Chtimes(d, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// waitGone polls until p no longer exists.
func waitGone(t testing.TB, p string, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, p+" removed", func() bool {
		_, err := os.Lstat(p)
		return os.IsNotExist(err)
	})
}

// TestJanitorStartPass: the temp files and directories a crash left
// (older than the default age, 1 h) are removed when the server starts;
// fresh ones (a directory with anything fresh in it), open ones, other
// names, and anything behind a symlink are kept.
func TestJanitorStartPass(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	const old = 2 * time.Hour
	outsideTemp := writeAged(t, outside, uploadPrefix+"outside", old)
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outsideTemp, filepath.Join(root, uploadPrefix+"symlink")); err != nil {
		t.Fatal(err)
	}
	openTemp := writeAged(t, root, "d/"+uploadPrefix+"open", old)
	held, err := os.Open(openTemp) // an upload in flight: this process holds it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	// A collection copy a crash cut: a temp directory, stale as a whole;
	// and one with a member written a minute ago deep down.
	staleDir := agedTree(t, root, "y/"+uploadPrefix+"copy", old, old)
	freshDir := agedTree(t, root, "y/"+uploadPrefix+"copying", old, time.Minute)
	cases := []struct {
		name string
		path string
		keep bool
	}{
		{"stale at the root", writeAged(t, root, uploadPrefix+"a", old), false},
		{"stale temp directory", staleDir, false},
		{"temp directory with a fresh member", freshDir, true},
		{"stale deep down", writeAged(t, root, "x/y/z/"+uploadPrefix+"b", old), false},
		{"fresh", writeAged(t, root, uploadPrefix+"c", time.Minute), true},
		{"open in this process", openTemp, true},
		{"other name", writeAged(t, root, "data.root", old), true},
		{"other reserved name", writeAged(t, root, reservedPrefix+"other", old), true},
		{"behind a symlink out of the root", outsideTemp, true},
		{"a symlink named like a temp file", filepath.Join(root, uploadPrefix+"symlink"), true},
	}
	ts := startServer(t, Config{Root: root})
	for _, tc := range cases {
		if !tc.keep {
			waitGone(t, tc.path, 10*time.Second)
		}
	}
	// The start pass is over once the stale files are gone; what it kept
	// must still be there.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.Lstat(tc.path)
			if gone := os.IsNotExist(err); gone == tc.keep {
				t.Errorf("after the start pass %s exists = %v, want %v", tc.path, !gone, tc.keep)
			}
		})
	}
	_, body := ts.do(t, "GET", "/metrics", nil)
	if !strings.Contains(body, "lakefed_storage_stale_uploads_removed_total 3\n") {
		t.Errorf("metrics lack lakefed_storage_stale_uploads_removed_total 3:\n%s", grepLines(body, "stale"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// TestJanitorPeriodic: a temp file that becomes stale while the server
// runs is removed by a later pass, and Close stops the janitor.
func TestJanitorPeriodic(t *testing.T) {
	root := t.TempDir()
	s, err := New(Config{Root: root, StaleUploadAge: 4 * time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	<-s.swept
	p := writeAged(t, root, "later/"+uploadPrefix+"x", time.Hour)
	waitGone(t, p, 10*time.Second) // the interval is max(age/4, 1 s) = 1 s
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s: janitor not stopped")
	}
}

// TestStorageConfigLimits: the new limits are validated.
func TestStorageConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative age", Config{StaleUploadAge: -time.Second}, "stale_upload_age"},
		{"negative listings", Config{MaxListings: -1}, "max_listings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Root = t.TempDir()
			_, err := New(tc.cfg, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
			}
		})
	}
}
