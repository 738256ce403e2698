package posix

import (
	"context"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/keptsum"
)

// Kept checksums are the storage role's sidecars (package keptsum) under
// the endpoint's root: when the root is also a storage role's root, both
// see the same sums. When the root is a subdirectory of a storage role's
// root, its sidecars are not found here (they live in the storage root's
// .lakefed-sums, keyed by inode), so Checksum computes, and keeps what it
// computed in <root>/.lakefed-sums, under the same rules as the storage
// role (the file must have settled first; see keptsum).
//
// The root is opened (os.OpenRoot) for each look-up rather than held: a
// held descriptor would keep pointing at the old directory after the
// mount under the root changes, and would pin the mount.

// keptSums returns the checksums kept for the file fi (found at a path
// below the root) that still match it, or nil. It never reads the file.
func (e *Endpoint) keptSums(fi os.FileInfo) map[string]string {
	st, ok := statOf(fi)
	if !ok {
		return nil
	}
	root, err := os.OpenRoot(e.root)
	if err != nil {
		return nil
	}
	defer root.Close()
	return keptsum.Read(root, st)
}

// statOf returns fi's stat when fi is a regular file.
func statOf(fi os.FileInfo) (*unix.Stat_t, bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return nil, false
	}
	// The fields keptsum reads; syscall.Stat_t and unix.Stat_t are the
	// same kernel struct, but Go does not convert one to the other.
	return &unix.Stat_t{
		Dev: sys.Dev, Ino: sys.Ino, Nlink: sys.Nlink, Size: sys.Size,
		Mtim: unix.Timespec(sys.Mtim), Ctim: unix.Timespec(sys.Ctim),
	}, true
}

// sum returns algo's checksum of the open regular file f: the kept one
// when it still matches, else by reading f once, kept afterwards when the
// file had settled (keptsum.Settled).
func (e *Endpoint) sum(ctx context.Context, f *os.File, algo string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(e.root)
	if err == nil {
		defer root.Close()
		if v, ok := keptsum.Read(root, &st)[algo]; ok {
			return v, nil
		}
	}
	keep, err := keptsum.Settled(ctx, f, &st)
	if err != nil {
		return "", err
	}
	r := ctxReader{ctx, io.NewSectionReader(f, 0, 1<<62)}
	sums, err := keptsum.Sum(r, f, &st, []string{algo}, make([]byte, copyBufSize))
	if err != nil {
		return "", err
	}
	if keep && root != nil {
		_ = keptsum.Write(root, &st, sums) // read-only root: computed again next time
	}
	return sums[algo], nil
}
