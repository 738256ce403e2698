package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Tmpfs mounts a fresh tmpfs with the given mount options (for example
// "size=8m", or "size=8m,nr_inodes=64" to bound the inodes and the space
// for extended attributes too) on a new directory and returns it. It is
// unmounted on t.Cleanup, so register it before anything that keeps files
// open in it (a server started afterwards is stopped first).
//
// Mounting needs root (CAP_SYS_ADMIN): without it the test is skipped, or
// fails under LAKEFED_REQUIRE_INTEROP=1.
//
//	dir := testenv.Tmpfs(t, "size=8m")
//	testenv.FillFS(t, dir, 64<<10) // leave 64 KiB free
func Tmpfs(t testing.TB, opts string) string {
	t.Helper()
	return MountTmpfs(t, t.TempDir(), opts)
}

// MountTmpfs is Tmpfs on an existing empty directory dir, for instance
// one inside another Tmpfs, to have a second file system below a root.
func MountTmpfs(t testing.TB, dir, opts string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		Missing(t, fmt.Sprintf("mount -t tmpfs -o %s: %v", opts, err))
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Something still holds a file open: detach it rather than
			// leave a mount behind; its memory goes when the holder closes.
			t.Errorf("umount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// FillFS fills the file system holding dir with one file,
// dir/.filler, until the write fails with ENOSPC, then gives back leave
// bytes, so that only about leave bytes stay free. It returns the filler's
// path; removing it frees the space.
func FillFS(t testing.TB, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, ".filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := f.Write(buf)
		n += int64(m)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			break
		}
		if err != nil {
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	if n < leave {
		t.Fatalf("fill %s: only %d bytes were free, cannot leave %d", dir, n, leave)
	}
	if err := f.Truncate(n - leave); err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	return p
}
