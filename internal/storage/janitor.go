package storage

// The upload janitor: removes the temp entries of uploads and copies that
// will never finish.
//
// Why: a PUT streams into ".lakefed-upload-<random>" beside its target and
// renames it at the end (put.go); a COPY or MOVE builds its file or whole
// collection under such a name and renames it into place, and moves a
// destination it replaces aside under one (copy.go). A clean failure
// removes them, but a crash (kill -9, OOM, power loss) leaves them, and
// nothing else ever would: after 20 concurrent PUTs killed mid-way every
// directory kept hundreds of MB of them. So the server sweeps Root once
// at start and then every janitorInterval(age), removing temp files, and
// temp directories with everything in them, older than
// Config.StaleUploadAge.
//
// An operation in flight is never touched, by three rules, all needed:
//   - Owned: a COPY or MOVE owns its temp names (tempOwners, atomic.go)
//     from before the entries exist until they are gone or renamed away,
//     and the janitor claims a name under the same lock right before it
//     removes anything. A destination moved aside keeps its old mtime, and
//     a collection being copied holds no descriptor on its top directory
//     between levels: only ownership tells that they are in use, and only
//     a check made under the owners' lock at the removal itself (not a
//     snapshot taken earlier in the pass) is sure to see an owner that
//     came meanwhile.
//   - Open: a temp file that this process holds open (its (dev, inode) is
//     in the fd table, /proc/self/fd) belongs to a live PUT, however long
//     its client has stalled. An mtime rule alone would remove a PUT whose
//     client paused longer than the age, and the PUT would then fail at
//     its rename. Reading the fd table, rather than keeping a set of names
//     in put.go, needs no bookkeeping on the PUT path and cannot drift.
//     A PUT's temp file is open from its creation, so a snapshot of the
//     table taken when the pass meets its first candidate sees it.
//   - Age: between its close and its rename (microseconds) a temp file is
//     no longer open; its mtime is then fresh (the last write just
//     happened), so the age rule covers that window, and the one between
//     a copy's temp entry being created and owned. A temp directory is
//     stale only if nothing in its tree was modified since the cutoff. It
//     also protects the uploads and copies of another process serving the
//     same Root (whose ownership this process cannot see).
//
// After a crash nothing owns or holds open what the dead process left, so
// the restarted server's passes remove it once it is older than the age.
//
// The walk never follows symlinks: every directory is opened with
// openat(O_NOFOLLOW|O_DIRECTORY) relative to its parent's descriptor, and
// files are removed with unlinkat relative to the same descriptor, so a
// directory swapped for a symlink mid-walk cannot lead outside Root. Its
// cost is bounded: at most janitorMaxEntries entries and janitorMaxDepth
// levels per pass (one descriptor per level). A tree larger than that is
// swept only as far as the budget goes, in directory order; the pass logs
// a warning when it stops there.
//
// The same pass sweeps the sidecars of kept checksums (keptsum, in
// Root/.lakefed-sums, named by the (dev, inode) of their file). Nothing can
// open a file by inode, so the pass first lists the sidecars (their
// (dev, ino) sorted in memory: 17 bytes each), then, walking the tree,
// fstats every regular file and marks its sidecar live; a sidecar whose
// fingerprint no longer matches its file is removed there and then
// (sidecars.file says how that stays cheap). After the walk, a sidecar whose inode was not found
// anywhere under Root is an orphan (its file deleted, replaced, or linked
// only outside Root) and is removed, but only when
//   - the walk saw the whole tree: a pass cut short by its budget, its
//     depth limit, or a directory it could not read removes no orphan;
//   - the sidecar is older than the pass: one written meanwhile (a MOVE
//     keeps its file's sums again after the rename) is for a file the
//     walk may have missed.
// A directory renamed from a part of the tree not yet walked into one
// already walked, during the pass, hides its files; their sidecars are
// removed, which costs a computation later, never a wrong sum. Removing a
// sidecar is never wrong: it only means computing again.

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/keptsum"
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
	var checked time.Time // start of the last whole pass (sidecars.file)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		res, err := s.sweepOnce(ctx, start, age, checked)
		if res.whole {
			checked = start
		}
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("stale upload sweep incomplete", "removed", res.uploads, "sidecars_removed", res.sidecars, "err", err)
		case res.uploads > 0 || res.sidecars > 0:
			s.log.Info("removed stale upload temp files and checksum sidecars", "removed", res.uploads, "sidecars_removed", res.sidecars)
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
	sums    *sidecars          // nil when Root has no sidecars
	partial bool               // part of the tree was not seen: no sidecar is an orphan
}

// whole reports whether a pass that ended with err saw the whole tree.
func (sw *sweep) whole(err error) bool { return err == nil && !sw.partial }

// sidecars is the sweep's view of Root/.lakefed-sums.
type sidecars struct {
	d       *os.File    // the directory, open
	keys    [][2]uint64 // (dev, ino) of each sidecar, sorted
	live    []bool      // live[i]: the walk found keys[i]'s file
	start   time.Time   // when the pass began
	checked time.Time   // files whose ctime is before this were checked by a whole pass
	removed int
}

// sweepResult counts what one pass removed.
type sweepResult struct {
	uploads  int  // stale temp entries of uploads and copies
	sidecars int  // sidecars of kept checksums: stale or orphaned
	whole    bool // the pass saw the whole tree
}

// sweepOnce removes the temp entries older than age that no operation
// uses and the stale or orphaned sidecars under Root, for a pass that
// starts now. checked is the start of the last whole pass (zero: none).
// Each temp entry also counts in the stale_uploads_removed metric.
func (s *Server) sweepOnce(ctx context.Context, now time.Time, age time.Duration, checked time.Time) (sweepResult, error) {
	fd, err := unix.Open(s.cfg.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return sweepResult{}, &os.PathError{Op: "open", Path: s.cfg.Root, Err: err}
	}
	sw := &sweep{ctx: ctx, cutoff: now.Add(-age)}
	err = s.listSidecars(sw, fd, filepath.Join(s.cfg.Root, keptsum.Dir), now, checked)
	if err == nil {
		if s.hooks != nil && s.hooks.walk != nil {
			s.hooks.walk()
		}
		err = s.sweepDir(sw, fd, s.cfg.Root, 0)
	} else {
		unix.Close(fd)
	}
	if sw.sums != nil {
		if sw.whole(err) {
			sw.sums.removeOrphans()
		}
		sw.sums.d.Close()
	}
	s.m.staleRemoved.Add(float64(sw.removed))
	res := sweepResult{uploads: sw.removed, whole: sw.whole(err)}
	if sw.sums != nil {
		res.sidecars = sw.sums.removed
	}
	return res, err
}

// listSidecars reads the sidecar directory below the root fd into sw.sums
// (left nil when there is none), and removes the stale temp files there
// as sweepDir does elsewhere. Its entries count in the pass's budget.
func (s *Server) listSidecars(sw *sweep, root int, dir string, start, checked time.Time) error {
	fd, err := unix.Openat(root, keptsum.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // none yet (or not a directory: keptsum cannot use it either)
	}
	sc := &sidecars{d: os.NewFile(uintptr(fd), dir), start: start, checked: checked.Add(-keptsum.SettleWindow)}
	sw.sums = sc
	for {
		if err := sw.ctx.Err(); err != nil {
			return err
		}
		ents, err := sc.d.ReadDir(janitorBatch)
		for _, e := range ents {
			if sw.entries++; sw.entries > janitorMaxEntries {
				return errJanitorBudget
			}
			name := e.Name()
			if dev, ino, ok := keptsum.ParseName(name); ok && e.Type().IsRegular() {
				sc.keys = append(sc.keys, [2]uint64{dev, ino})
			} else if e.Type().IsRegular() && strings.HasPrefix(name, uploadPrefix) {
				if sw.stale(fd, name) && s.removeTemp(fd, name) {
					sw.removed++
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			// A listing that stopped part way: sweep no sidecar this
			// pass (the walk then goes through the directory as any).
			sc.d.Close()
			sw.sums = nil
			return nil
		}
	}
	slices.SortFunc(sc.keys, compareKeys)
	sc.live = make([]bool, len(sc.keys))
	return nil
}

// compareKeys orders (dev, ino) pairs.
func compareKeys(a, b [2]uint64) int {
	return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
}

// file checks the regular file name of directory fd against the sidecars:
// marks its sidecar live, and removes it if its fingerprint is not the
// file's.
//
// Cheaply, by two filters before any sidecar is read:
//   - A file whose ctime is before the start of the last whole pass
//     (sc.checked, less a clock tick) has not changed since that pass
//     checked it, and a sidecar written since is for this version. Such
//     files, most of them, cost the one fstat the live set needs.
//   - The kernel stamps the file's ctime and the sidecar's mtime from the
//     same clock. A file whose ctime is earlier than its sidecar's mtime
//     last changed before the sidecar was written, which is then almost
//     always for this version; it is not read. The others (changed after
//     the write, or in the same clock tick) are read and removed when the
//     fingerprint is not the file's. The rare stale sidecar this misses
//     (the file changed between the writer's fstat and its write) is
//     never trusted anyway.
func (sc *sidecars) file(fd int, name string) {
	if len(sc.keys) == 0 {
		return // no sidecars: spare the fstat
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	i, found := slices.BinarySearchFunc(sc.keys, [2]uint64{st.Dev, st.Ino}, compareKeys)
	if !found || sc.live[i] {
		return // no sidecar, or a second name of a file already checked
	}
	sc.live[i] = true
	if st.Ctim.Nano() < sc.checked.UnixNano() {
		return
	}
	base := path.Base(keptsum.Name(&st))
	dfd := int(sc.d.Fd())
	var side unix.Stat_t
	if unix.Fstatat(dfd, base, &side, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Ctim.Nano() < side.Mtim.Nano() {
		return
	}
	sfd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var buf [keptsum.MaxSize]byte
	n, rerr := unix.Read(sfd, buf[:])
	ferr := unix.Fstat(sfd, &side)
	unix.Close(sfd)
	if rerr != nil || ferr != nil || keptsum.Parse(string(buf[:n]), &st) != nil {
		return
	}
	// The file may have changed since its fstat, and the sidecar read
	// been kept for the new version: then it stays.
	var now unix.Stat_t
	if unix.Fstatat(fd, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || !keptsum.SameVersion(&now, &st) {
		return
	}
	sc.remove(base, &side)
}

// removeOrphans removes the sidecars whose file the walk did not find,
// unless written since the pass began. The kernel stamps ctime from a
// clock that may lag time.Now by a tick, so "since" starts
// keptsum.SettleWindow (more than a tick) before the pass.
func (sc *sidecars) removeOrphans() {
	since := sc.start.Add(-keptsum.SettleWindow)
	for i, k := range sc.keys {
		if sc.live[i] {
			continue
		}
		base := path.Base(keptsum.Name(&unix.Stat_t{Dev: k[0], Ino: k[1]}))
		var side unix.Stat_t
		if unix.Fstatat(int(sc.d.Fd()), base, &side, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			!time.Unix(side.Ctim.Unix()).Before(since) {
			continue
		}
		sc.remove(base, &side)
	}
}

// remove unlinks the sidecar base if it is still the inode seen as seen:
// one replaced since (by a rename from keptsum.Write) is fresh and stays.
func (sc *sidecars) remove(base string, seen *unix.Stat_t) {
	var now unix.Stat_t
	fd := int(sc.d.Fd())
	if unix.Fstatat(fd, base, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Ino != seen.Ino || now.Dev != seen.Dev {
		return
	}
	if unix.Unlinkat(fd, base, 0) == nil {
		sc.removed++
	}
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
			if e.IsDir() && strings.HasPrefix(name, uploadPrefix) && !s.temps.owned(name) {
				// (owned spares walking a tree in use twice; removeTemp's
				// claim decides.)
				stale, err := sw.staleTree(fd, name, depth+1)
				if err != nil {
					return err
				}
				if stale && s.removeTemp(fd, name) {
					sw.removed++
					continue
				}
				// In use: walked as any directory, so the sidecars of its
				// files (a destination moved aside) stay live.
			}
			switch {
			case e.Type().IsRegular() && strings.HasPrefix(name, uploadPrefix):
				if sw.stale(fd, name) && s.removeTemp(fd, name) {
					sw.removed++
				}
			case e.Type().IsRegular() && sw.sums != nil && !strings.HasPrefix(name, reservedPrefix):
				sw.sums.file(fd, name)
			case e.IsDir() && depth == 0 && name == keptsum.Dir && sw.sums != nil:
				// Swept by listSidecars.
			case e.IsDir() && depth >= janitorMaxDepth: // IsDir is false for a symlink
				sw.partial = true
			case e.IsDir():
				sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					// Gone, swapped for a symlink, or no permission: its
					// files are not seen.
					sw.partial = true
					continue
				}
				if err := s.sweepDir(sw, sub, filepath.Join(dir, name), depth+1); err != nil {
					return err
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				sw.partial = true // a read error ends this directory only
			}
			return nil
		}
	}
}

// removeTemp removes the temp entry name of directory fd (a file, or a
// directory and its tree) unless an operation of this process owns it,
// which it checks by claiming the name (tempOwners) right before the
// removal. It reports whether the entry is gone.
func (s *Server) removeTemp(fd int, name string) bool {
	disown, ok := s.temps.claim(name)
	if !ok {
		return false
	}
	defer disown()
	return removeAt(fd, name) == nil
}

// staleTree reports whether nothing in the tree of the temp directory name
// of directory fd, itself included, was modified since the cutoff, with
// depth its level below Root. A tree deeper than janitorMaxDepth, or one
// the walk cannot read whole, is not stale: that cannot be shown. Its
// entries count in the pass's budget. Symlinks are not followed.
func (sw *sweep) staleTree(fd int, name string, depth int) (bool, error) {
	if depth > janitorMaxDepth {
		return false, nil
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	d := os.NewFile(uintptr(sub), name)
	defer d.Close()
	var st unix.Stat_t
	if unix.Fstat(sub, &st) != nil || !sw.old(&st) {
		return false, nil
	}
	for {
		if err := sw.ctx.Err(); err != nil {
			return false, err
		}
		names, err := d.Readdirnames(janitorBatch)
		for _, n := range names {
			if sw.entries++; sw.entries > janitorMaxEntries {
				return false, errJanitorBudget
			}
			var est unix.Stat_t
			if unix.Fstatat(sub, n, &est, unix.AT_SYMLINK_NOFOLLOW) != nil || !sw.old(&est) {
				return false, nil
			}
			if isDir(&est) {
				if ok, err := sw.staleTree(sub, n, depth+1); !ok || err != nil {
					return false, err
				}
			}
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, nil
		}
	}
}

// old reports whether st was last modified before the pass's cutoff.
func (sw *sweep) old(st *unix.Stat_t) bool {
	return time.Unix(st.Mtim.Unix()).Before(sw.cutoff)
}

// stale reports whether the temp file name in directory fd is older than
// the cutoff and not open in this process.
func (sw *sweep) stale(fd int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	if !sw.old(&st) {
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
