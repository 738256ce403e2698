// Package keptsum keeps the checksums of the files under a directory in
// sidecar files, and says when a kept checksum may be trusted. The storage
// role keeps and reads them; the posix endpoint kind reads them (and keeps
// the ones it computes) under its own root, so both see the same sums when
// they serve the same directory.
//
//	root, _ := os.OpenRoot(dir)
//	sums := keptsum.Read(root, &st) // nil: none valid for this version of the file
//	keep, err := keptsum.Settled(ctx, f, &st)
//	sums, err = keptsum.Sum(f, f, &st, []string{"adler32"}, buf)
//	if keep { _ = keptsum.Write(root, &st, sums) }
//
// # Format
//
// A file's checksums live in Dir/.lakefed-sum-<dev>-<inode> (both in hex)
// under the root. Its first line is the fingerprint of the file they were
// computed for, "<size> <mtime-ns> <ctime-ns>"; then comes one
// "<algo> <hex>" line per algorithm. A sidecar whose fingerprint differs
// from the file's current one is ignored, so a changed file never shows
// an old checksum.
//
// Why ctime, and why a sidecar: size and mtime alone miss a same-size
// rewrite in place whose mtime is then set back (touch -d, rsync -t,
// tar x). Users cannot set the ctime, and every change of content or
// metadata moves it; the inode tells a replaced file from its successor.
// But setting an xattr on the file moves its ctime too (as does rename),
// so a ctime fingerprint kept in the file's own xattr invalidates itself
// the moment it is written. The sidecar is another inode: keeping a
// checksum changes nothing about the file, so neither its fingerprint
// nor an ETag made from it. It also works where user xattrs do not.
//
// Sidecars are keyed by inode, not by path, so only a reader whose root
// is the directory they were written under finds them: a posix endpoint
// whose root is a subdirectory of a storage role's root looks in
// <subdir>/.lakefed-sums, finds nothing the storage role kept, and
// computes (keeping its own sums there).
//
// # When a sum may be kept
//
// A sum computed by reading the file is kept only when Settled said so:
// the file is read only once its ctime is SettleWindow old. Any change
// after that gets a later ctime (the kernel stamps ctime from a clock of
// at most one tick, ≤ 10 ms, granularity), and Sum's fstat after the read
// catches changes during it; so the sum kept matches the fingerprint
// kept. On a file system whose timestamps have whole seconds (ctime
// ns = 0), a file changed less than CoarseWindow ago is not kept.
//
// Stale sidecars (of files deleted or replaced) are never wrong, only
// unused: a reused inode has a newer ctime. The storage role's janitor
// removes them.
package keptsum

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

const (
	// Dir is the directory, relative to the root, that holds the
	// sidecars. It starts with the storage role's reserved prefix
	// ".lakefed-", so its listings and checks skip it.
	Dir = ".lakefed-sums"
	// TempPrefix starts the temporary file a sidecar is written to
	// before its rename: the upload prefix of the storage role and of the
	// posix kind, so the storage role's janitor removes what a crash
	// leaves.
	TempPrefix = ".lakefed-upload-"
	// SettleWindow is how old a file's ctime must be before a sum read
	// from it may be kept (see the package comment).
	SettleWindow = 50 * time.Millisecond
	// CoarseWindow replaces SettleWindow on file systems with whole-second
	// timestamps.
	CoarseWindow = 2 * time.Second
	// MaxSize is how much of a sidecar is read; three sums need < 100 bytes.
	MaxSize = 512

	namePrefix = ".lakefed-sum-"
)

// ErrChanged says a file changed while its checksum was being computed.
// It is transient: asking again reads the new version.
var ErrChanged = errors.New("keptsum: file changed while computing its checksum")

// Root is the directory the sidecars are kept under; *os.Root implements
// it. Read opens with O_RDONLY|O_NONBLOCK (a FIFO planted as a sidecar
// cannot hang it); Write creates, renames and may make Dir.
type Root interface {
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Mkdir(name string, perm fs.FileMode) error
	Rename(oldname, newname string) error
	Remove(name string) error
}

// Name is the path, relative to the root, of the sidecar of the file
// with stat st.
func Name(st *unix.Stat_t) string {
	return Dir + "/" + namePrefix + strconv.FormatUint(st.Dev, 16) + "-" + strconv.FormatUint(st.Ino, 16)
}

// ParseName returns the device and inode a sidecar's base name is for;
// ok is false for any other name (temp files among them).
func ParseName(base string) (dev, ino uint64, ok bool) {
	rest, ok := strings.CutPrefix(base, namePrefix)
	if !ok {
		return 0, 0, false
	}
	d, i, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, 0, false
	}
	dev, err := strconv.ParseUint(d, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	ino, err = strconv.ParseUint(i, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return dev, ino, true
}

// Fingerprint is the first line of a sidecar for the file st.
func Fingerprint(st *unix.Stat_t) string {
	return strconv.FormatInt(st.Size, 10) + " " + strconv.FormatInt(st.Mtim.Nano(), 10) + " " + strconv.FormatInt(st.Ctim.Nano(), 10)
}

// SameVersion reports whether a and b are the same file unchanged: same
// inode, size, mtime and ctime.
func SameVersion(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// Read returns the kept checksums valid for the file st (nil when there
// are none, or no sidecar can be read).
func Read(r Root, st *unix.Stat_t) map[string]string {
	f, err := r.OpenFile(Name(st), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	var buf [MaxSize]byte
	n, _ := io.ReadFull(f, buf[:])
	f.Close()
	return Parse(string(buf[:n]), st)
}

// Parse returns the sums in a sidecar's text if its fingerprint is st's
// (nil otherwise); lines that are not a known algorithm with a
// well-formed value are skipped.
func Parse(text string, st *unix.Stat_t) map[string]string {
	first, rest, ok := strings.Cut(text, "\n")
	if !ok || first != Fingerprint(st) {
		return nil
	}
	var sums map[string]string
	for line := range strings.SplitSeq(rest, "\n") {
		algo, v, ok := strings.Cut(line, " ")
		if !ok || !wellFormed(algo, v) {
			continue
		}
		if sums == nil {
			sums = map[string]string{}
		}
		sums[algo] = v
	}
	return sums
}

// wellFormed reports whether v is a lower-case hex value of algo's
// length, the form httpx.SumString writes.
func wellFormed(algo, v string) bool {
	want := 8
	switch algo {
	case httpx.MD5:
		want = 32
	case httpx.Adler32, httpx.CRC32C:
	default:
		return false
	}
	if len(v) != want {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Write keeps sums for the file st, merged with those already kept for
// the same fingerprint. The caller vouches that sums belong to st (see
// Settled and Sum). The sidecar is replaced by rename, so a reader sees
// the old or the new one whole. Failures (read-only root, disk full) only
// mean a later request computes again.
func Write(r Root, st *unix.Stat_t, sums map[string]string) error {
	if len(sums) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(Fingerprint(st))
	b.WriteByte('\n')
	kept := Read(r, st)
	for _, a := range []string{httpx.Adler32, httpx.CRC32C, httpx.MD5} {
		v, ok := sums[a]
		if !ok {
			v, ok = kept[a]
		}
		if ok && wellFormed(a, v) {
			b.WriteString(a + " " + v + "\n")
		}
	}
	if err := r.Mkdir(Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	tmp := Dir + "/" + TempPrefix + strconv.FormatUint(rand.Uint64(), 16)
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Rename(tmp, Name(st))
	}
	if err != nil {
		r.Remove(tmp)
	}
	return err
}

// Drop removes the sidecar of the file st, which is gone (replaced),
// unless another name still links the file.
func Drop(r Root, st *unix.Stat_t) {
	if st.Nlink <= 1 {
		r.Remove(Name(st))
	}
}

// Settle says how long to wait before reading the file st so that a sum
// computed from the read can be kept with st's fingerprint (0: at once),
// or keep false when it cannot be kept at all (coarse timestamps, or a
// ctime in the future: the clock was set back).
func Settle(st *unix.Stat_t, now time.Time) (wait time.Duration, keep bool) {
	age := now.Sub(time.Unix(st.Ctim.Unix()))
	switch {
	case age < 0:
		return 0, false
	case st.Ctim.Nsec == 0:
		return 0, age >= CoarseWindow
	case age >= SettleWindow:
		return 0, true
	}
	return SettleWindow - age, true
}

// Settled waits, if needed, until the open file f (stat st) has settled
// (see Settle) and reports whether a sum read from it afterwards may be
// kept. A file changed during the wait gives ErrChanged. When ctx ends
// first, Settled returns at once with keep false: the sum can still be
// computed, just not kept.
func Settled(ctx context.Context, f *os.File, st *unix.Stat_t) (keep bool, err error) {
	wait, keep := Settle(st, time.Now())
	if wait <= 0 {
		return keep, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, nil
	case <-t.C:
	}
	var now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &now); err != nil {
		return false, fmt.Errorf("keptsum: %w", err)
	}
	if !SameVersion(&now, st) {
		return false, ErrChanged
	}
	return keep, nil
}

// Sum hashes all of r, which reads the open file f (stat st) from its
// start, once with every algorithm in algos (known to httpx.NewHash),
// using buf. It gives ErrChanged when f is not st any more after the read,
// or r gave other than st.Size bytes, so the sums returned are st's.
func Sum(r io.Reader, f *os.File, st *unix.Stat_t, algos []string, buf []byte) (map[string]string, error) {
	hs := make([]hash.Hash, len(algos))
	ws := make([]io.Writer, len(algos))
	for i, a := range algos {
		hs[i] = httpx.NewHash(a)
		ws[i] = hs[i]
	}
	n, err := io.CopyBuffer(io.MultiWriter(ws...), r, buf)
	if err != nil {
		return nil, err
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err != nil {
		return nil, fmt.Errorf("keptsum: %w", err)
	}
	if n != st.Size || !SameVersion(&after, st) {
		return nil, ErrChanged
	}
	out := make(map[string]string, len(algos))
	for i, a := range algos {
		out[a] = httpx.SumString(hs[i])
	}
	return out, nil
}
