// Package posix is the endpoint kind for a local directory (file:///abs/dir):
// a site's own disk, a mounted parallel file system (Lustre, CephFS, EOS
// FUSE), or a test's temporary directory.
//
// The endpoint never leaves its root: every path is resolved with its
// symlinks followed, and one that lands outside the root is refused
// (ErrRefused). Writes go to a hidden temporary file beside the target
// that is fsynced and renamed, so a reader never sees half a file.
//
//	ep, err := posix.New(ctx, endpoint.Config{Name: "disk", URL: "file:///data/atlas"}, log)
//	info, err := ep.Stat(ctx, "/f.root")
//	rc, err := ep.Open(ctx, "/f.root", 0, -1)
//	err = ep.Put(ctx, "/new/g.root", r, size)
//	sum, err := ep.Checksum(ctx, "/f.root", "adler32")
package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/durable"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/keptsum"
)

// TempPrefix starts the name of every temporary upload file. It is the
// prefix the storage role uses too, so either of them serving the same
// directory hides the other's uploads in progress from listings.
const TempPrefix = ".lakefed-upload-"

// copyBufSize is the buffer for Checksum: large enough that big
// files move in few system calls.
const copyBufSize = 1 << 20

// Endpoint is a local directory. It is safe for concurrent use.
type Endpoint struct {
	name string
	root string // absolute, symlinks resolved
	log  *slog.Logger

	owners owners // names of uids and gids (namespace.go)
}

var (
	_ endpoint.Endpoint          = (*Endpoint)(nil)
	_ endpoint.Checksummer       = (*Endpoint)(nil)
	_ endpoint.ConditionalPutter = (*Endpoint)(nil)
	_ endpoint.ValidatorReporter = (*Endpoint)(nil)
)

// New returns the endpoint for cfg.URL, which must be file:///abs/dir naming
// an existing directory. log nil means slog.Default().
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (*Endpoint, error) {
	if cfg.Name == "" {
		return nil, errors.New("posix: endpoint name is empty")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("posix: endpoint %s: url: %w", cfg.Name, err)
	}
	if u.Scheme != "file" {
		return nil, fmt.Errorf("posix: endpoint %s: url %q: scheme is not file", cfg.Name, cfg.URL)
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("posix: endpoint %s: url %q: host must be empty (file:///abs/dir)", cfg.Name, cfg.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("posix: endpoint %s: url %q: no query, fragment or user allowed", cfg.Name, cfg.URL)
	}
	dir := u.Path
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("posix: endpoint %s: url %q: directory must be absolute", cfg.Name, cfg.URL)
	}
	root, err := filepath.EvalSymlinks(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("posix: endpoint %s: root: %w", cfg.Name, err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("posix: endpoint %s: root: %w", cfg.Name, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("posix: endpoint %s: root %s is not a directory", cfg.Name, root)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Endpoint{name: cfg.Name, root: root, log: log.With("component", "endpoint", "endpoint", cfg.Name)}, nil
}

// Name returns the endpoint's name from the config.
func (e *Endpoint) Name() string { return e.name }

// Root returns the directory the endpoint serves, with symlinks resolved.
func (e *Endpoint) Root() string { return e.root }

// errEscape is the cause when a path resolves outside the root.
var errEscape = errors.New("path leads outside the endpoint root")

// resolve maps the endpoint path p to a host path inside the root with
// every existing symlink on the way resolved. Components that do not exist
// yet are kept as they are (a Put or Mkdir creates them). A path that
// resolves outside the root gives errEscape.
//
// The check and the later use are two steps, so a symlink swapped in
// between by someone with write access to the root could still win the
// race; lakefed itself never creates symlinks.
func (e *Endpoint) resolve(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return "", errors.New("path is not clean and absolute")
	}
	if path.Clean(p) != p {
		return "", errors.New("path is not clean")
	}
	full := filepath.Join(e.root, filepath.FromSlash(p))
	cur, rest := full, ""
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if !e.within(r) {
				return "", errEscape
			}
			if rest == "" {
				return r, nil
			}
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", err
		}
		if cur == e.root {
			return "", err
		}
		// A dangling symlink as the last existing component: stay on the
		// link itself (os.Stat of it reports not found; rename replaces it).
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if rest != "" {
				return "", err
			}
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = filepath.Dir(cur)
	}
}

// within reports whether the resolved host path r is the root or below it.
func (e *Endpoint) within(r string) bool {
	return r == e.root || e.root == string(filepath.Separator) ||
		strings.HasPrefix(r, e.root+string(filepath.Separator))
}

// wrap turns an OS error into the endpoint's classes:
// not there → ErrNotFound; permission, escape, wrong type → ErrRefused;
// anything else (I/O errors, disk full) → ErrUnavailable.
func wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	var class error
	switch {
	case errors.Is(err, endpoint.ErrNotFound), errors.Is(err, endpoint.ErrRefused),
		errors.Is(err, endpoint.ErrUnavailable):
		return opErr(op, p, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		class = endpoint.ErrNotFound
	case errors.Is(err, syscall.ENOTEMPTY):
		// Go counts ENOTEMPTY as fs.ErrExist; it is a refusal, not "exists".
		class = endpoint.ErrNotEmpty
	case errors.Is(err, fs.ErrExist):
		class = endpoint.ErrExist
	case errors.Is(err, syscall.EXDEV):
		// A rename across file systems below the root: not one step.
		class = endpoint.ErrUnsupported
	case errors.Is(err, errEscape), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EINVAL):
		class = endpoint.ErrRefused
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		class = endpoint.ErrUnavailable
	default:
		class = endpoint.ErrUnavailable
	}
	return opErr(op, p, fmt.Errorf("%w: %w", class, err))
}

// opErr is the error of op on path p: "posix: op "p": err".
func opErr(op, p string, err error) error {
	return &endpoint.OpError{Kind: endpoint.KindPosix, Op: op, Path: p, Err: err}
}

func (e *Endpoint) infoOf(p string, fi fs.FileInfo) endpoint.Info {
	name := path.Base(p)
	size := fi.Size()
	if fi.IsDir() {
		size = 0
	}
	in := endpoint.Info{Name: name, Size: size, ModTime: fi.ModTime(), IsDir: fi.IsDir()}
	if tag := fileTag(fi); tag != "" {
		in.ETag, in.Strong = tag, true
	}
	e.describe(&in, fi)
	return in
}

// etagOf is a file's entity tag, made as the storage role makes its own:
// modification time and size, then the inode and the change time (ns,
// hex). Nobody can set the ctime back, and a file replaced by another
// has another inode (or, reused, a newer ctime), so the tag changes with
// the content even when the size and the modification time are kept
// (cp -p, touch -r): it is strong (endpoint.Info.Strong).
func etagOf(st *syscall.Stat_t) string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, st.Mtim.Nano(), 16)
	b = strconv.AppendInt(b, st.Size, 16)
	b = append(b, '-')
	b = strconv.AppendUint(b, st.Ino, 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, st.Ctim.Nano(), 16)
	return string(b)
}

// Validators are strong: see etagOf.
func (e *Endpoint) Validators() endpoint.Validators { return endpoint.ValidatorsStrong }

// Stat describes path. Checksums holds those kept in the root's sidecars
// (by the storage role or by Checksum) that still match the file (see
// sums.go).
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if err := ctx.Err(); err != nil {
		return endpoint.Info{}, wrap("stat", p, err)
	}
	r, err := e.resolve(p)
	if err != nil {
		return endpoint.Info{}, wrap("stat", p, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return endpoint.Info{}, wrap("stat", p, err)
	}
	in := e.infoOf(p, fi)
	in.Checksums = e.keptSums(fi)
	return in, nil
}

// List returns the entries of dir. Symlinks are followed when they stay in
// the root and skipped otherwise (escaping or dangling); temporary upload
// files and the root's sidecar directory of kept checksums are hidden.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap("list", dir, err)
	}
	r, err := e.resolve(dir)
	if err != nil {
		return nil, wrap("list", dir, err)
	}
	fi, err := os.Stat(r)
	if err != nil {
		return nil, wrap("list", dir, err)
	}
	if !fi.IsDir() {
		return nil, opErr("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
	}
	ents, err := os.ReadDir(r)
	if err != nil {
		return nil, wrap("list", dir, err)
	}
	out := make([]endpoint.Info, 0, len(ents))
	for _, de := range ents {
		if strings.HasPrefix(de.Name(), TempPrefix) || dir == "/" && de.Name() == keptsum.Dir {
			continue // uploads in progress; the kept checksums (sums.go)
		}
		child := path.Join(dir, de.Name())
		var cfi fs.FileInfo
		if de.Type()&fs.ModeSymlink != 0 {
			cr, err := e.resolve(child)
			if err != nil {
				continue
			}
			if cfi, err = os.Stat(cr); err != nil {
				continue
			}
		} else if cfi, err = de.Info(); err != nil {
			continue // removed since ReadDir
		}
		out = append(out, e.infoOf(child, cfi))
	}
	return out, nil
}

// Open reads n bytes of path from off (n < 0: to the end). off equal to the
// size gives an empty reader; off beyond it wraps ErrRefused. A range that
// runs past the end is cut at the end, like io.ReaderAt at EOF.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap("open", p, err)
	}
	if off < 0 {
		return nil, opErr("open", p, fmt.Errorf("%w: negative offset", endpoint.ErrRefused))
	}
	r, err := e.resolve(p)
	if err != nil {
		return nil, wrap("open", p, err)
	}
	f, err := os.Open(r)
	if err != nil {
		return nil, wrap("open", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, wrap("open", p, err)
	}
	if fi.IsDir() {
		f.Close()
		return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	if off > fi.Size() {
		f.Close()
		return nil, opErr("open", p, endpoint.BeyondEnd(off, fi.Size()))
	}
	if n < 0 || off+n > fi.Size() {
		n = fi.Size() - off
	}
	return &file{f: f, sr: io.NewSectionReader(f, off, n), p: p, ver: e.infoOf(p, fi)}, nil
}

// file is an open range of a local file.
type file struct {
	f   *os.File
	sr  *io.SectionReader
	p   string
	ver endpoint.Info // from fstat of the open file (endpoint.Versioned)
}

func (f *file) Version() endpoint.Info { return f.ver }

func (f *file) Read(b []byte) (int, error) {
	n, err := f.sr.Read(b)
	if err != nil && err != io.EOF {
		err = wrap("read", f.p, err)
	}
	return n, err
}

func (f *file) Close() error { return f.f.Close() }

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// Put stores r as path through a hidden temporary file in the target's
// directory: written, fsynced, renamed over the target, then the directory
// is fsynced. Missing parents are created. With size ≥ 0, a reader that
// gives fewer or more bytes fails the Put (ErrRefused) and nothing changes.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	return e.put(ctx, p, r, size, nil)
}

// PutIf is Put committed only if cond holds (endpoint.ConditionalPutter):
// once the temporary file is complete, the target's directory is locked
// (flock), the target looked at (its ETag as Stat gives it), and the
// rename made before the lock is released. Put and Delete take the same
// lock for their rename and removal, so no Put or Delete of another
// endpoint on the same directory, in this process or another, falls
// between the check and the rename. Other programs writing the directory
// do not take it.
func (e *Endpoint) PutIf(ctx context.Context, p string, r io.Reader, size int64, cond endpoint.Cond) error {
	return e.put(ctx, p, r, size, &cond)
}

// put is Put, and PutIf with cond set.
func (e *Endpoint) put(ctx context.Context, p string, r io.Reader, size int64, cond *endpoint.Cond) error {
	if p == "/" {
		return opErr("put", p, fmt.Errorf("%w: is the root", endpoint.ErrRefused))
	}
	target, err := e.resolve(p)
	if err != nil {
		return wrap("put", p, err)
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return opErr("put", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return wrap("put", p, err)
	}
	tmp, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return wrap("put", p, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	src := io.Reader(ctxReader{ctx, r})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	written, err := durable.Receive(tmp, src, io.Discard, durable.Options{})
	if err != nil {
		if ctx.Err() != nil {
			return wrap("put", p, ctx.Err())
		}
		return opErr("put", p, fmt.Errorf("%w: reading source: %w", endpoint.ErrRefused, err))
	}
	if size >= 0 && written != size {
		return opErr("put", p, fmt.Errorf("%w: source gave %d bytes, want %d", endpoint.ErrRefused, written, size))
	}
	if err := tmp.Chmod(0o644); err != nil {
		return wrap("put", p, err)
	}
	if err := tmp.Sync(); err != nil {
		return wrap("put", p, err)
	}
	if err := tmp.Close(); err != nil {
		return wrap("put", p, err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return wrap("put", p, err)
	}
	if err := check(target, cond); err != nil {
		unlock()
		return wrap("put", p, err)
	}
	err = os.Rename(tmp.Name(), target)
	unlock()
	if err != nil {
		os.Remove(tmp.Name())
		done = true
		return wrap("put", p, err)
	}
	done = true
	// Make the rename durable. An error here leaves a complete file that
	// may not survive a crash; report it.
	if err := durable.SyncDir(dir); err != nil {
		return wrap("put", p, err)
	}
	return nil
}

// lockDir takes the exclusive flock of the directory dir, which Put,
// PutIf and Delete hold around their rename or removal of an entry in it
// (see PutIf), and returns its release.
func lockDir(dir string) (func(), error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(d.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { d.Close() }, nil // closing the descriptor releases the flock
}

// check evaluates cond (nil: none) against what is at the resolved path
// target now: nil when it holds, else an error wrapping ErrPrecondition.
func check(target string, cond *endpoint.Cond) error {
	if cond == nil || cond.IfMatch == "" && !cond.IfNoneMatch {
		return nil
	}
	fi, err := os.Stat(target)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case err != nil && cond.IfMatch != "":
		return fmt.Errorf("%w: if-match %q: nothing there", endpoint.ErrPrecondition, cond.IfMatch)
	case err == nil && cond.IfNoneMatch:
		return fmt.Errorf("%w: if-none-match: something is there", endpoint.ErrPrecondition)
	case err == nil && cond.IfMatch != "" && fileTag(fi) != cond.IfMatch:
		return fmt.Errorf("%w: if-match %q: it is %q now", endpoint.ErrPrecondition, cond.IfMatch, fileTag(fi))
	}
	return nil
}

// fileTag is fi's entity tag (etagOf), "" for anything but a regular file.
func fileTag(fi fs.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return ""
	}
	return etagOf(st)
}

// Delete removes the file or empty directory path. A symlink is removed
// itself, not its target. The root cannot be deleted (ErrRefused).
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return wrap("delete", p, err)
	}
	if p == "/" {
		return opErr("delete", p, fmt.Errorf("%w: is the root", endpoint.ErrRefused))
	}
	parent, err := e.resolve(path.Dir(p))
	if err != nil {
		return wrap("delete", p, err)
	}
	target := filepath.Join(parent, path.Base(p))
	if _, err := os.Lstat(target); err != nil {
		return wrap("delete", p, err)
	}
	unlock, err := lockDir(parent)
	if err != nil {
		return wrap("delete", p, err)
	}
	err = os.Remove(target)
	unlock()
	if err != nil {
		if errors.Is(err, syscall.EEXIST) {
			err = syscall.ENOTEMPTY // some systems say EEXIST for a full directory
		}
		return wrap("delete", p, err)
	}
	return nil
}

// Mkdir creates path and its missing parents. An existing directory is
// fine; an existing file wraps ErrExist.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error {
	if err := ctx.Err(); err != nil {
		return wrap("mkdir", p, err)
	}
	r, err := e.resolve(p)
	if err != nil {
		return wrap("mkdir", p, err)
	}
	if err := os.MkdirAll(r, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			err = fs.ErrExist // a file is in the way
		}
		return wrap("mkdir", p, err)
	}
	if fi, err := os.Stat(r); err != nil {
		return wrap("mkdir", p, err)
	} else if !fi.IsDir() {
		return wrap("mkdir", p, fs.ErrExist)
	}
	return nil
}

// Probe checks that the root is still a directory we can stat (a lost
// mount or a dead NFS server shows here).
func (e *Endpoint) Probe(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return opErr("probe", "", fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	fi, err := os.Stat(e.root)
	if err != nil {
		return opErr("probe", "", fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	if !fi.IsDir() {
		return opErr("probe", "", fmt.Errorf("%w: root is not a directory", endpoint.ErrUnavailable))
	}
	return nil
}

// Checksum returns path's adler32, md5 or crc32c in the form
// endpoint.Info.Checksums documents: the kept value when it still matches
// the file, else by reading the file once (and keeping the result; see
// sums.go). Other algorithms wrap ErrUnsupported.
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	if !httpx.KnownAlgorithm(algo) {
		return "", fmt.Errorf("posix: checksum %q: %s: %w", p, algo, endpoint.ErrUnsupported)
	}
	rc, err := e.Open(ctx, p, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	v, err := e.sum(ctx, rc.(*file).f, algo)
	if err != nil {
		return "", wrap("checksum", p, err)
	}
	return v, nil
}
