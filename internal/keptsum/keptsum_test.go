package keptsum

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newFile writes body as name under a new root and returns the root and
// the file's stat.
func newFile(t *testing.T, body string) (*os.Root, string, unix.Stat_t) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, p, st
}

func TestNameRoundTrip(t *testing.T) {
	st := unix.Stat_t{Dev: 0xfd01, Ino: 0x1234abcd}
	name := Name(&st)
	dir, base, _ := strings.Cut(name, "/")
	if dir != Dir {
		t.Errorf("Name = %q, want it in %s", name, Dir)
	}
	dev, ino, ok := ParseName(base)
	if !ok || dev != st.Dev || ino != st.Ino {
		t.Errorf("ParseName(%q) = %x, %x, %v; want %x, %x, true", base, dev, ino, ok, st.Dev, st.Ino)
	}
	for _, bad := range []string{TempPrefix + "12", namePrefix + "12", namePrefix + "x-1", namePrefix + "1-", "other"} {
		if _, _, ok := ParseName(bad); ok {
			t.Errorf("ParseName(%q) ok, want not a sidecar name", bad)
		}
	}
}

func TestParse(t *testing.T) {
	st := unix.Stat_t{Size: 9, Mtim: unix.Timespec{Sec: 5, Nsec: 6}, Ctim: unix.Timespec{Sec: 7, Nsec: 8}}
	fp := Fingerprint(&st)
	if fp != "9 5000000006 7000000008" {
		t.Fatalf("Fingerprint = %q", fp)
	}
	cases := []struct {
		name, text string
		want       map[string]string
	}{
		{"valid", fp + "\nadler32 11e60398\nmd5 0123456789abcdef0123456789abcdef\n", map[string]string{"adler32": "11e60398", "md5": "0123456789abcdef0123456789abcdef"}},
		{"other ctime", "9 5000000006 7000000009\nadler32 11e60398\n", nil},
		{"size and mtime only (the old fingerprint)", "9 5000000006\nadler32 11e60398\n", nil},
		{"bad lines skipped", fp + "\nadler32 11E60398\nsha1 11e60398\ncrc32c 1\ncrc32c 0000000a\n", map[string]string{"crc32c": "0000000a"}},
		{"no newline", fp, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Parse(c.text, &st)
			if len(got) != len(c.want) {
				t.Fatalf("Parse = %v, want %v", got, c.want)
			}
			for a, v := range c.want {
				if got[a] != v {
					t.Errorf("Parse[%s] = %q, want %q", a, got[a], v)
				}
			}
		})
	}
}

func TestSettle(t *testing.T) {
	now := time.Unix(1000, 500_000_000)
	at := func(d time.Duration) unix.Stat_t {
		c := now.Add(-d)
		return unix.Stat_t{Ctim: unix.NsecToTimespec(c.UnixNano())}
	}
	cases := []struct {
		name     string
		st       unix.Stat_t
		wantWait time.Duration
		wantKeep bool
	}{
		{"settled", at(time.Second), 0, true},
		{"just changed", at(10 * time.Millisecond), SettleWindow - 10*time.Millisecond, true},
		{"ctime in the future", at(-time.Second), 0, false},
		{"coarse and recent", unix.Stat_t{Ctim: unix.Timespec{Sec: 999}}, 0, false},
		{"coarse and old", unix.Stat_t{Ctim: unix.Timespec{Sec: 990}}, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wait, keep := Settle(&c.st, now)
			if wait != c.wantWait || keep != c.wantKeep {
				t.Errorf("Settle = %v, %v; want %v, %v", wait, keep, c.wantWait, c.wantKeep)
			}
		})
	}
}

// TestWriteRead: sums written are read back for the same version,
// merged with those kept before, and not for another version; Drop
// removes them.
func TestWriteRead(t *testing.T) {
	root, _, st := newFile(t, "Wikipedia")
	if got := Read(root, &st); got != nil {
		t.Fatalf("Read before Write = %v, want nil", got)
	}
	if err := Write(root, &st, map[string]string{"adler32": "11e60398"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(root, &st, map[string]string{"crc32c": "0000000a"}); err != nil {
		t.Fatal(err)
	}
	got := Read(root, &st)
	if got["adler32"] != "11e60398" || got["crc32c"] != "0000000a" || len(got) != 2 {
		t.Errorf("Read = %v, want adler32 and crc32c merged", got)
	}
	other := st
	other.Ctim.Nsec++
	if got := Read(root, &other); got != nil {
		t.Errorf("Read for a later ctime = %v, want nil", got)
	}
	ents, _ := os.ReadDir(filepath.Join(root.Name(), Dir))
	if len(ents) != 1 {
		t.Errorf("%s holds %d entries, want the sidecar only (no temp files)", Dir, len(ents))
	}
	Drop(root, &st)
	if got := Read(root, &st); got != nil {
		t.Errorf("Read after Drop = %v, want nil", got)
	}
}

// TestSumChanged: a file changed during the read gives ErrChanged, not a
// sum that would be kept for the old fingerprint.
func TestSumChanged(t *testing.T) {
	_, p, st := newFile(t, "Wikipedia")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums, err := Sum(f, f, &st, []string{"adler32"}, make([]byte, 4))
	if err != nil || sums["adler32"] != "11e60398" {
		t.Fatalf("Sum = %v, %v; want adler32 11e60398", sums, err)
	}
	if err := os.WriteFile(p, []byte("Wikipedie"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Sum(strings.NewReader("Wikipedia"), f, &st, []string{"adler32"}, make([]byte, 4)); !errors.Is(err, ErrChanged) {
		t.Errorf("Sum after a change = %v, want ErrChanged", err)
	}
}

// TestSettledWaits: a file changed a moment ago is read only after the
// window; a cancelled context ends the wait with keep false.
func TestSettledWaits(t *testing.T) {
	_, p, st := newFile(t, "x")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if wait, _ := Settle(&st, time.Now()); wait <= 0 {
		t.Skip("file system timestamps too coarse for a settle wait")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if keep, err := Settled(ctx, f, &st); keep || err != nil {
		t.Errorf("Settled with a cancelled ctx = %v, %v; want false, nil", keep, err)
	}
	keep, err := Settled(context.Background(), f, &st)
	if !keep || err != nil {
		t.Errorf("Settled = %v, %v; want true, nil", keep, err)
	}
	if age := time.Since(time.Unix(st.Ctim.Unix())); age < SettleWindow {
		t.Errorf("Settled returned %v after the change, want ≥ %v", age, SettleWindow)
	}
}
