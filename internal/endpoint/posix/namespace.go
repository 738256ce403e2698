package posix

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/keptsum"
)

var (
	_ endpoint.Renamer       = (*Endpoint)(nil)
	_ endpoint.Truncater     = (*Endpoint)(nil)
	_ endpoint.Chmoder       = (*Endpoint)(nil)
	_ endpoint.SpaceReporter = (*Endpoint)(nil)
)

// entry resolves the parent of p and returns the host path of p itself,
// not followed if it is a symlink (Delete and Rename act on the link).
func (e *Endpoint) entry(p string) (string, error) {
	parent, err := e.resolve(path.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(parent, path.Base(p)), nil
}

// Rename moves from to to with rename(2), which replaces a file at to in
// one step. Missing parents of to are made first; a directory at to, or
// anything at to when from is a directory, wraps ErrExist. The kept
// checksums of a renamed file go with it (rename moves its ctime, which
// their fingerprint holds).
func (e *Endpoint) Rename(ctx context.Context, from, to string) error {
	if err := ctx.Err(); err != nil {
		return wrap("rename", from, err)
	}
	switch {
	case from == "/" || to == "/":
		return opErr("rename", from, fmt.Errorf("%w: the root cannot be renamed or replaced", endpoint.ErrRefused))
	case strings.HasPrefix(to, from+"/"):
		return opErr("rename", from, fmt.Errorf("%w: %s is inside it", endpoint.ErrRefused, to))
	}
	src, err := e.entry(from)
	if err != nil {
		return wrap("rename", from, err)
	}
	sfi, err := os.Lstat(src)
	if err != nil {
		return wrap("rename", from, err)
	}
	if from == to {
		return nil
	}
	dst, err := e.entry(to)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			err = fmt.Errorf("%w: a file is in the way of %s", endpoint.ErrExist, path.Dir(to))
		}
		return wrap("rename", to, err)
	}
	if dfi, err := os.Lstat(dst); err == nil && (dfi.IsDir() || sfi.IsDir()) {
		return opErr("rename", to, fmt.Errorf("%w: %s is there", endpoint.ErrExist, kindName(dfi)))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			err = fmt.Errorf("%w: a file is in the way of %s", endpoint.ErrExist, path.Dir(to))
		}
		return wrap("rename", to, err)
	}
	before, sums := e.sumsOf(sfi)
	if err := os.Rename(src, dst); err != nil {
		return wrap("rename", from, err)
	}
	e.keepSums(dst, before, sums)
	for _, d := range []string{filepath.Dir(src), filepath.Dir(dst)} {
		if err := syncDir(d); err != nil {
			return wrap("rename", to, err)
		}
	}
	return nil
}

func kindName(fi fs.FileInfo) string {
	if fi.IsDir() {
		return "a directory"
	}
	return "a file"
}

// syncDir makes the entries of directory d durable.
func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// sumsOf returns fi's stat and the checksums kept for it, when fi is a
// regular file that has some.
func (e *Endpoint) sumsOf(fi fs.FileInfo) (*unix.Stat_t, map[string]string) {
	st, ok := statOf(fi)
	if !ok {
		return nil, nil
	}
	sums := e.keptSums(fi)
	if len(sums) == 0 {
		return nil, nil
	}
	return st, sums
}

// keepSums keeps sums again for the file now at host path r, when it is
// still the file before describes with the same bytes (same inode, size
// and mtime): rename and chmod move only its ctime.
func (e *Endpoint) keepSums(r string, before *unix.Stat_t, sums map[string]string) {
	if before == nil {
		return
	}
	fi, err := os.Lstat(r)
	if err != nil {
		return
	}
	now, ok := statOf(fi)
	if !ok || now.Dev != before.Dev || now.Ino != before.Ino || now.Size != before.Size || now.Mtim != before.Mtim {
		return
	}
	root, err := os.OpenRoot(e.root)
	if err != nil {
		return
	}
	defer root.Close()
	_ = keptsum.Write(root, now, sums) // no room: computed again when asked
}

// Truncate sets the size of the file p with truncate(2).
func (e *Endpoint) Truncate(ctx context.Context, p string, size int64) error {
	if err := ctx.Err(); err != nil {
		return wrap("truncate", p, err)
	}
	if size < 0 {
		return opErr("truncate", p, fmt.Errorf("%w: negative size %d", endpoint.ErrRefused, size))
	}
	r, err := e.resolve(p)
	if err != nil {
		return wrap("truncate", p, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return wrap("truncate", p, err)
	}
	if fi.IsDir() {
		return opErr("truncate", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	f, err := os.OpenFile(r, os.O_WRONLY, 0)
	if err != nil {
		return wrap("truncate", p, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return wrap("truncate", p, err)
	}
	return wrap("truncate", p, f.Sync())
}

// Chmod sets the permission bits of p with chmod(2) (a symlink's target,
// which stays in the root). The kept checksums of a file stay valid.
func (e *Endpoint) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return wrap("chmod", p, err)
	}
	r, err := e.resolve(p)
	if err != nil {
		return wrap("chmod", p, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return wrap("chmod", p, err)
	}
	before, sums := e.sumsOf(fi)
	if err := os.Chmod(r, mode.Perm()); err != nil {
		return wrap("chmod", p, err)
	}
	e.keepSums(r, before, sums)
	return nil
}

// Space reports the file system holding the root (statfs(2)): what an
// unprivileged writer may still use (f_bavail) is Free.
func (e *Endpoint) Space(ctx context.Context, p string) (endpoint.Space, error) {
	if err := ctx.Err(); err != nil {
		return endpoint.Space{}, wrap("space", p, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(e.root, &st); err != nil {
		return endpoint.Space{}, wrap("space", p, err)
	}
	bs := int64(st.Bsize)
	total, free := int64(st.Blocks)*bs, int64(st.Bavail)*bs
	used := total - int64(st.Bfree)*bs
	return endpoint.Space{Total: total, Free: free, Used: used, LargestFree: free}, nil
}

// owners maps uids and gids to names for Info.Owner and Group. A name
// looked up is kept for ownerTTL: accounts change rarely, and a Stat must
// not read /etc/passwd.
type owners struct {
	users, groups nameCache
}

const ownerTTL = 5 * time.Minute

// describe fills in's mode, owner, group, ctime and atime from fi.
func (e *Endpoint) describe(in *endpoint.Info, fi fs.FileInfo) {
	in.Mode = fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	in.CTime = time.Unix(st.Ctim.Unix())
	in.ATime = time.Unix(st.Atim.Unix())
	in.Owner = e.owners.users.name(st.Uid, func(id string) (string, error) {
		u, err := user.LookupId(id)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	})
	in.Group = e.owners.groups.name(st.Gid, func(id string) (string, error) {
		g, err := user.LookupGroupId(id)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

// nameCache remembers the names of numeric ids; an id without a name is
// its number, as ls shows it.
type nameCache struct {
	mu sync.Mutex // guards m
	m  map[uint32]cachedName
}

type cachedName struct {
	name    string
	expires time.Time
}

// maxNames bounds a nameCache; at the bound it starts afresh.
const maxNames = 4096

func (c *nameCache) name(id uint32, lookup func(string) (string, error)) string {
	now := time.Now()
	c.mu.Lock()
	if n, ok := c.m[id]; ok && now.Before(n.expires) {
		c.mu.Unlock()
		return n.name
	}
	c.mu.Unlock()
	s := strconv.FormatUint(uint64(id), 10)
	name, err := lookup(s)
	if err != nil || name == "" {
		name = s
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxNames {
		c.m = map[uint32]cachedName{}
	}
	c.m[id] = cachedName{name: name, expires: now.Add(ownerTTL)}
	c.mu.Unlock()
	return name
}
