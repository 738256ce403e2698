package storage

// The upload janitor: removes the temp files of uploads that will never
// finish.
//
// Why: a PUT streams into ".lakefed-upload-<random>" beside its target and
// renames it at the end (put.go). A clean failure removes the temp file,
// but a crash (kill -9, OOM, power loss) leaves it, and nothing else ever
// would: after 20 concurrent PUTs killed mid-way every directory kept
// hundreds of MB of them. So the server sweeps Root once at start and then
// every janitorInterval(age), removing temp files older than
// Config.StaleUploadAge.
//
// An upload in flight is never touched, by two rules, both needed:
//   - Open: a temp file that this process holds open (its (dev, inode) is
//     in the fd table, /proc/self/fd) belongs to a live PUT, however long
//     its client has stalled. An mtime rule alone would remove a PUT whose
//     client paused longer than the age, and the PUT would then fail at
//     its rename. Reading the fd table, rather than keeping a set of names
//     in put.go, needs no bookkeeping on the PUT path and cannot drift.
//   - Age: between its close and its rename (microseconds) a temp file is
//     no longer open; its mtime is then fresh (the last write just
//     happened), so the age rule covers that window. It also protects the
//     uploads of another process serving the same Root.
//
// The walk never follows symlinks: every directory is opened with
// openat(O_NOFOLLOW|O_DIRECTORY) relative to its parent's descriptor, and
// files are removed with unlinkat relative to the same descriptor, so a
// directory swapped for a symlink mid-walk cannot lead outside Root. Its
// cost is bounded: at most janitorMaxEntries entries and janitorMaxDepth
// levels per pass (one descriptor per level). A tree larger than that is
// swept only as far as the budget goes, in directory order; the pass logs
// a warning when it stops there.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultStaleUploadAge is Config.StaleUploadAge when it is zero.
const DefaultStaleUploadAge = time.Hour

// Bounds of one janitor pass.
const (
	janitorMaxEntries = 2_000_000 // directory entries looked at per pass
	janitorMaxDepth   = 128       // directory levels below Root (one fd each)
	janitorBatch      = 512       // entries read per getdents batch
)

// errJanitorBudget stops a pass that reached janitorMaxEntries.
var errJanitorBudget = errors.New("storage: janitor: entry budget of one pass used up")

// janitorInterval is the time between sweeps: a quarter of the age (a stale
// file waits at most 1.25 × age), at least a second, at most 15 minutes.
func janitorInterval(age time.Duration) time.Duration {
	return min(max(age/4, time.Second), 15*time.Minute)
}

// runJanitor sweeps at once, then periodically, until ctx is cancelled.
func (s *Server) runJanitor(ctx context.Context) {
	age := s.cfg.StaleUploadAge
	t := time.NewTimer(0)
	defer t.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		removed, err := s.sweepUploads(ctx, time.Now().Add(-age))
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("stale upload sweep incomplete", "removed", removed, "err", err)
		case removed > 0:
			s.log.Info("removed stale upload temp files", "removed", removed)
		}
		if first {
			close(s.swept)
			first = false
		}
		t.Reset(janitorInterval(age))
	}
}

// sweep is the state of one janitor pass.
type sweep struct {
	ctx     context.Context
	cutoff  time.Time // temp files last modified before this are stale
	entries int       // entries looked at so far
	removed int
	open    map[[2]uint64]bool // (dev, ino) of this process's open files; nil until needed
}

// sweepUploads removes the stale upload temp files under Root and returns
// how many it removed. Each one also counts in the stale_uploads_removed
// metric.
func (s *Server) sweepUploads(ctx context.Context, cutoff time.Time) (int, error) {
	fd, err := unix.Open(s.cfg.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: s.cfg.Root, Err: err}
	}
	sw := &sweep{ctx: ctx, cutoff: cutoff}
	err = s.sweepDir(sw, fd, s.cfg.Root, 0)
	s.m.staleRemoved.Add(float64(sw.removed))
	return sw.removed, err
}

// sweepDir sweeps the directory open as fd (and closes it), then its
// subdirectories. dir is its path, only for ReadDir's lstat on file
// systems that report no entry types; the removal itself goes by fd.
func (s *Server) sweepDir(sw *sweep, fd int, dir string, depth int) error {
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	for {
		if err := sw.ctx.Err(); err != nil {
			return err
		}
		ents, err := d.ReadDir(janitorBatch)
		for _, e := range ents {
			if sw.entries++; sw.entries > janitorMaxEntries {
				return errJanitorBudget
			}
			name := e.Name()
			switch {
			case e.Type().IsRegular() && strings.HasPrefix(name, uploadPrefix):
				if sw.stale(fd, name) && unix.Unlinkat(fd, name, 0) == nil {
					sw.removed++
				}
			case e.IsDir() && depth < janitorMaxDepth: // IsDir is false for a symlink
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					continue // gone, swapped for a symlink, or no permission
				}
				if err := s.sweepDir(sw, sub, filepath.Join(dir, name), depth+1); err != nil {
					return err
				}
			}
		}
		if err != nil {
			return nil // io.EOF at the end; a read error ends this directory only
		}
	}
}

// stale reports whether the temp file name in directory fd is older than
// the cutoff and not open in this process.
func (sw *sweep) stale(fd int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	if !time.Unix(st.Mtim.Unix()).Before(sw.cutoff) {
		return false
	}
	if sw.open == nil {
		sw.open = openFiles()
	}
	return !sw.open[[2]uint64{st.Dev, st.Ino}]
}

// openFiles returns the (dev, ino) of every file this process has open,
// read from /proc/self/fd. The snapshot is taken after the candidate was
// found stale, so a PUT that opened its temp file is in it; a descriptor
// closed and reused in between can only make a file look open (kept until
// the next pass), never the reverse.
func openFiles() map[[2]uint64]bool {
	open := map[[2]uint64]bool{}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return open
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			open[[2]uint64{st.Dev, st.Ino}] = true
		}
	}
	return open
}
