package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Directory-relative primitives for writing a new version of a resource
// beside the old one and swapping it in, as PUT does for one file and
// COPY/MOVE (copy.go) do for files and collections. Every name here is one
// directory entry (no slash) of a directory opened beneath Root, so no
// symlink can take them elsewhere.

// tempName returns a fresh hidden entry name with the prefix PUT uses for
// its temp files: clients cannot name it (reserved), listings hide it,
// and the janitor removes it (file or directory) if a crash leaves it.
func tempName() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return uploadPrefix + hex.EncodeToString(rnd[:])
}

// tempOwners are the temp entry names (tempName) that operations of this
// process are using now; the janitor removes none of them (janitor.go).
// An operation owns a name from before any entry bears it until after
// the entry is gone or renamed away, and the janitor claims a name under
// the same lock right before it removes the entry. So the janitor, which
// only looks at entries that exist, cannot remove one an operation still
// uses, whatever its age or the order of events: a name that exists and
// is not owned can never become owned again (names are random). The zero
// value is ready to use.
type tempOwners struct {
	mu   sync.Mutex
	live map[string]bool // guarded by mu: the names owned now
}

// own marks name owned and returns the function that gives it up.
func (o *tempOwners) own(name string) (disown func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ownLocked(name)
	return func() { o.disown(name) }
}

// owned reports whether an operation owns name now: a hint, as it may
// be given up at once; claim is the check to act on.
func (o *tempOwners) owned(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.live[name]
}

// claim owns name for the janitor unless an operation owns it already:
// ok is false then, else disown gives it up after the removal.
func (o *tempOwners) claim(name string) (disown func(), ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.live[name] {
		return nil, false
	}
	o.ownLocked(name)
	return func() { o.disown(name) }, true
}

func (o *tempOwners) ownLocked(name string) {
	if o.live == nil {
		o.live = map[string]bool{}
	}
	o.live[name] = true
}

func (o *tempOwners) disown(name string) {
	o.mu.Lock()
	delete(o.live, name)
	o.mu.Unlock()
}

// renameNoReplace renames from (in directory fd fromDir) to to (in toDir)
// unless to exists (then an error matching fs.ErrExist).
func renameNoReplace(fromDir int, from string, toDir int, to string) error {
	err := unix.Renameat2(fromDir, from, toDir, to, unix.RENAME_NOREPLACE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		// A file system without RENAME_NOREPLACE (NFS, some FUSE): check,
		// then rename. The window between the two is the one every server
		// on such a file system has.
		var st unix.Stat_t
		if unix.Fstatat(toDir, to, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			err = unix.EEXIST
		} else {
			err = unix.Renameat(fromDir, from, toDir, to)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// renameAt is renameat(2): it replaces to when both are files (or links).
func renameAt(fromDir int, from string, toDir int, to string) error {
	if err := unix.Renameat(fromDir, from, toDir, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// removeAt removes the entry name of directory dir and, for a directory,
// everything below it. It never follows a symlink: a link is removed, not
// its target. A missing entry is no error.
func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	switch {
	case err == nil, err == unix.ENOENT:
		return nil
	case err != unix.EISDIR:
		return &os.PathError{Op: "unlink", Path: name, Err: err}
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	d := os.NewFile(uintptr(fd), name)
	names, rerr := d.Readdirnames(-1)
	var errs []error
	for _, n := range names {
		errs = append(errs, removeAt(fd, n))
	}
	d.Close()
	if err := errors.Join(append(errs, rerr)...); err != nil {
		return err
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return &os.PathError{Op: "rmdir", Path: name, Err: err}
	}
	return nil
}
