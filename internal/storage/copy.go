package storage

// COPY and MOVE (RFC 4918 §9.8, §9.9) are answered here, not by
// x/net/webdav, whose copyFiles and moveFiles
//   - recurse into the destination when it lies inside the source (§9.8.3
//     warns of exactly that): COPY /a to /a/b/c ran until its depth limit
//     and left ~500 nested copies;
//   - delete an existing destination first and then write the copy in
//     place, so a full disk left a truncated file (later served with a
//     checksum of its broken bytes) and a failure part way a partial tree;
//   - answer MOVE to a missing parent or of a missing source with 403 and
//     default MOVE to Overwrite F (§10.6 says T).
//
// Here a COPY writes the whole new resource (file or collection) under a
// hidden temp name in the destination's collection, fsyncs it and only
// then renames it into place, as PUT does; on any failure the temp tree is
// removed and the destination is untouched (507 for ENOSPC/EDQUOT). A
// MOVE is a rename, or, to another file system below Root, that same copy
// followed by removing the source. Whether the destination is the source,
// inside it or above it is decided on resolved identities (device and
// inode, walking up with ".."), so spelling (slashes, %-escapes) and
// symlinks inside Root cannot hide it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/keptsum"
	"github.com/lakefed/lakefed/internal/storage/davlock"
)

// errLoop is a symlink inside a collection being copied that leads back
// to the collection or one of its ancestors: the tree has no end.
var errLoop = errors.New("storage: copy: symlink loop in the source collection")

// copyChunk is how much one copy_file_range round moves before the
// request's context is checked again.
const copyChunk = 64 << 20

// maxWalkUp bounds the ".." walk of ancestorOf; a path of PATH_MAX bytes
// has fewer levels.
const maxWalkUp = 4096

// fileID identifies a file or directory after symlinks are resolved.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

// copyMove is one checked COPY or MOVE request.
type copyMove struct {
	move      bool
	src, dst  string      // clean request paths
	srcSt     unix.Stat_t // the source, symlinks followed
	infinite  bool        // Depth: infinity (COPY of a collection; always for MOVE)
	dstDir    *os.File    // the destination's parent collection, open
	dstBase   string      // the destination's name in dstDir
	dstExists bool        // an entry (maybe a dangling symlink) is at dst
	dstIsDir  bool        // that entry is a directory (not followed)
}

// serveCopyMove answers COPY and MOVE on the clean path src. Statuses
// (RFC 4918 §9.8.5, §9.9.4): 201 created, 204 replaced, 400 bad header,
// 403 source and destination overlap, 404 no source, 409 no parent
// collection at the destination, 412 destination exists and Overwrite F,
// 423 locked, 507 out of space, 508 symlink loop in the source.
func (s *Server) serveCopyMove(w http.ResponseWriter, r *http.Request, src string) {
	cm, code, reason := s.parseCopyMove(r, src)
	if code != 0 {
		httpError(w, code, reason)
		return
	}
	overwrite := r.Header.Get("Overwrite") != "F"
	// Path locks (precond.go): the destination's always, so that no PUT
	// or DELETE of it runs between the checks below and the install (a
	// PUT landing while the old destination is moved aside would be
	// undone by the move back); the source's for a MOVE, which removes
	// it, and for a COPY with preconditions, held from their check to
	// the end of the copy.
	paths := []string{cm.dst}
	if cm.move || hasPreconditions(r.Header) {
		paths = append(paths, cm.src)
	}
	unlock := s.paths.lock(paths...)
	defer unlock()
	if !s.checkPreconditions(w, r, cm.src) {
		return
	}
	// RFC 4918 §7.5.1: a COPY only needs the destination unlocked.
	targets := []davlock.Target{{Path: cm.dst, Deep: true}}
	if cm.move {
		targets = append(targets, davlock.Target{Path: cm.src, Deep: true})
	}
	release, ok := s.locks.Guard(w, r, targets...)
	if !ok {
		return
	}
	defer release()
	if code, reason := s.checkCopyMove(r, cm, overwrite); code != 0 {
		httpError(w, code, reason)
		return
	}
	defer cm.dstDir.Close()
	var err error
	if cm.move {
		err = s.moveResource(r.Context(), cm)
	} else {
		err = s.copyResource(r.Context(), cm)
	}
	if err != nil {
		code, reason := s.copyStatus(r, err)
		httpError(w, code, reason)
		return
	}
	w.Header()["Content-Length"] = hdrZero
	if cm.dstExists {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// parseCopyMove checks the request's headers: Destination, Overwrite and
// Depth.
func (s *Server) parseCopyMove(r *http.Request, src string) (*copyMove, int, string) {
	dst, code, reason := s.checkDestination(r, src)
	if code != 0 {
		return nil, code, reason
	}
	cm := &copyMove{move: r.Method == "MOVE", src: src, dst: dst, infinite: true}
	switch r.Header.Get("Overwrite") {
	case "", "T", "F": // RFC 4918 §10.6: absent means T
	default:
		return nil, http.StatusBadRequest, "bad Overwrite header: want T or F"
	}
	switch r.Header.Get("Depth") {
	case "", "infinity":
	case "0":
		if cm.move {
			// RFC 4918 §9.9.2: a MOVE of a collection is always Depth infinity.
			return nil, http.StatusBadRequest, "MOVE takes no Depth but infinity"
		}
		cm.infinite = false
	default:
		// RFC 4918 §9.8.3: a COPY takes Depth 0 or infinity.
		return nil, http.StatusBadRequest, "bad Depth header: want 0 or infinity"
	}
	if dst == src {
		return nil, http.StatusForbidden, "source and destination are the same resource"
	}
	return cm, 0, ""
}

// checkCopyMove looks at the source and destination on disk: the source
// must exist, the destination's parent must be a collection, the two must
// not overlap, and an existing destination needs Overwrite T. On success
// cm.dstDir is open and the caller closes it.
func (s *Server) checkCopyMove(r *http.Request, cm *copyMove, overwrite bool) (int, string) {
	if err := s.statRel(rel(cm.src), &cm.srcSt); err != nil {
		return s.fsStatus(r, err)
	}
	if !cm.move && !isDir(&cm.srcSt) && !isReg(&cm.srcSt) {
		return http.StatusForbidden, "not a file or a collection"
	}
	dir, base := path.Split(cm.dst)
	d, err := s.openRel(rel(path.Clean(dir)), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return http.StatusConflict, "destination: parent collection does not exist"
		}
		return s.fsStatus(r, err)
	}
	cm.dstDir, cm.dstBase = d, base
	code, reason := s.checkDestinationEntry(r, cm, overwrite)
	if code != 0 {
		d.Close()
	}
	return code, reason
}

// checkDestinationEntry is checkCopyMove once the parent is open.
func (s *Server) checkDestinationEntry(r *http.Request, cm *copyMove, overwrite bool) (int, string) {
	var lst unix.Stat_t
	switch err := unix.Fstatat(int(cm.dstDir.Fd()), cm.dstBase, &lst, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		cm.dstExists, cm.dstIsDir = true, isDir(&lst)
	case err != unix.ENOENT:
		return s.fsStatus(r, &os.PathError{Op: "stat", Path: cm.dst, Err: err})
	}
	over, err := s.overlap(cm)
	if err != nil {
		return s.fsStatus(r, err)
	}
	if over {
		// RFC 4918 §9.8.5, §9.9.4: 403 when source and destination are
		// the same; one inside the other is refused alike, as it would
		// recurse without end (COPY) or delete the source (Overwrite T).
		return http.StatusForbidden, "source and destination overlap"
	}
	if cm.dstExists && !overwrite {
		return http.StatusPreconditionFailed, "destination exists and Overwrite is F"
	}
	return 0, ""
}

// overlap reports whether the destination, resolved, is the source, lies
// inside it, or contains it.
func (s *Server) overlap(cm *copyMove) (bool, error) {
	var rootSt unix.Stat_t
	if err := s.statRel(".", &rootSt); err != nil {
		return false, err
	}
	root, src := idOf(&rootSt), idOf(&cm.srcSt)
	var dstSt unix.Stat_t
	dstResolved := cm.dstExists && s.statRel(rel(cm.dst), &dstSt) == nil
	if dstResolved && idOf(&dstSt) == src {
		return true, nil
	}
	if isDir(&cm.srcSt) {
		if in, err := ancestorOf(int(cm.dstDir.Fd()), src, root); in || err != nil {
			return in, err
		}
	}
	if !dstResolved || !isDir(&dstSt) {
		return false, nil
	}
	sdir, err := s.openRel(rel(path.Dir(cm.src)), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false, err
	}
	defer sdir.Close()
	return ancestorOf(int(sdir.Fd()), idOf(&dstSt), root)
}

// ancestorOf reports whether target is the directory dir or one of its
// ancestors up to root, walking the real parents with "..".
func ancestorOf(dir int, target, root fileID) (bool, error) {
	fd, err := unix.Openat(dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, &os.PathError{Op: "open", Path: ".", Err: err}
	}
	defer func() { unix.Close(fd) }()
	var prev fileID
	for range maxWalkUp {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return false, &os.PathError{Op: "fstat", Path: "..", Err: err}
		}
		id := idOf(&st)
		switch id {
		case target:
			return true, nil
		case root, prev: // prev: "/" is its own parent
			return false, nil
		}
		prev = id
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, &os.PathError{Op: "open", Path: "..", Err: err}
		}
		unix.Close(fd)
		fd = up
	}
	return false, nil
}

// copyResource copies the source to a temp entry beside the destination
// and renames it into place; on failure nothing is left.
func (s *Server) copyResource(ctx context.Context, cm *copyMove) error {
	dir := int(cm.dstDir.Fd())
	tmp := tempName()
	defer s.temps.own(tmp)() // a partial tree is no crash's leftover (janitor.go)
	c := &copier{s: s, ctx: ctx, infinite: cm.infinite, top: tmp}
	err := c.copy(rel(cm.src), &cm.srcSt, dir, tmp)
	if err == nil {
		err = s.install(dir, tmp, isDir(&cm.srcSt), cm)
	}
	if err != nil {
		if rerr := removeAt(dir, tmp); rerr != nil {
			s.log.WarnContext(ctx, "could not remove copy temp", "path", cm.dst, "err", rerr)
		}
		return err
	}
	if err := syncDir(cm.dstDir, cm.dst); err != nil {
		return err
	}
	c.keepSums(dir, cm.dstBase)
	return nil
}

// moveResource renames the source to the destination. Across file
// systems below Root (rename gives EXDEV) it copies, then removes the
// source: RFC 4918 §9.9 defines MOVE as COPY then DELETE.
func (s *Server) moveResource(ctx context.Context, cm *copyMove) error {
	dir, base := path.Split(cm.src)
	sdir, err := s.openRel(rel(path.Clean(dir)), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer sdir.Close()
	var lst unix.Stat_t
	if err := unix.Fstatat(int(sdir.Fd()), base, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "stat", Path: cm.src, Err: err}
	}
	var carry map[string]string
	if isReg(&lst) {
		carry = s.copySums(&lst)
	}
	err = s.install(int(sdir.Fd()), base, isDir(&lst), cm)
	switch {
	case errors.Is(err, unix.EXDEV):
		if err = s.copyResource(ctx, cm); err == nil {
			err = removeAt(int(sdir.Fd()), base)
		}
	case err == nil && carry != nil:
		s.keepMoved(&lst, carry, cm)
	}
	if err != nil {
		return err
	}
	if err := syncDir(sdir, cm.src); err != nil {
		return err
	}
	return syncDir(cm.dstDir, cm.dst)
}

// keepMoved keeps again the checksums of a file a MOVE renamed: rename
// moves the ctime, which the kept sums' fingerprint holds (checksum.go).
// Nothing is kept if the file changed otherwise. Members of a renamed
// collection keep their ctime, and so their sums.
func (s *Server) keepMoved(before *unix.Stat_t, sums map[string]string, cm *copyMove) {
	var now unix.Stat_t
	if unix.Fstatat(int(cm.dstDir.Fd()), cm.dstBase, &now, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		now.Dev != before.Dev || now.Ino != before.Ino || now.Size != before.Size || now.Mtim != before.Mtim {
		return
	}
	_ = s.storeSums(&now, sums) // no room: later requests compute them
}

// install renames the entry from of directory fromDir to the destination,
// replacing what is there.
func (s *Server) install(fromDir int, from string, fromIsDir bool, cm *copyMove) error {
	toDir, to := int(cm.dstDir.Fd()), cm.dstBase
	switch {
	case !cm.dstExists:
		return renameNoReplace(fromDir, from, toDir, to)
	case !fromIsDir && !cm.dstIsDir:
		return renameAt(fromDir, from, toDir, to) // atomic replace
	}
	// rename(2) cannot put anything over a non-empty collection, nor a
	// collection over a file: move the old entry aside first, and back if
	// the rename fails. The aside name is owned (tempOwners) from before
	// the rename: the old entry keeps its mtime, so the janitor's age rule
	// alone would take it, and with it the only copy of the destination.
	aside := tempName()
	defer s.temps.own(aside)()
	if err := renameAt(toDir, to, toDir, aside); err != nil {
		return err
	}
	if s.hooks != nil && s.hooks.aside != nil {
		s.hooks.aside()
	}
	if err := renameNoReplace(fromDir, from, toDir, to); err != nil {
		if rerr := renameAt(toDir, aside, toDir, to); rerr != nil {
			// Something took the name meanwhile (a PUT of a member
			// makes the collection again). The old destination must not
			// stay under a temp name, which the janitor sweeps once this
			// COPY gives it up: it is kept under a name no pass removes,
			// for the operator to restore.
			kept := keptPrefix + strings.TrimPrefix(aside, uploadPrefix)
			if kerr := renameNoReplace(toDir, aside, toDir, kept); kerr != nil {
				kept = aside
			}
			s.log.Error("could not put back the destination; its old content is kept beside it", "path", cm.dst, "kept_as", kept, "err", rerr)
		}
		return err
	}
	if err := removeAt(toDir, aside); err != nil {
		s.log.Warn("could not remove the replaced destination", "path", cm.dst, "err", err)
	}
	return nil
}

// syncDir makes the renames in directory d durable. Its error must keep
// the request from a 2xx: until the directory is synced, a crash may undo
// the rename the client would be told of.
func syncDir(d *os.File, p string) error {
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync the directory of %s: %w", p, err)
	}
	return nil
}

// copyStatus maps a COPY or MOVE failure to a status: fsStatus plus the
// failures only copying has.
func (s *Server) copyStatus(r *http.Request, err error) (int, string) {
	switch {
	case errors.Is(err, errLoop):
		// RFC 5842 §7.2: a loop met while processing Depth infinity.
		return http.StatusLoopDetected, "symlink loop in the source collection"
	case errors.Is(err, fs.ErrExist):
		return http.StatusPreconditionFailed, "destination created meanwhile"
	case errors.Is(err, unix.E2BIG), errors.Is(err, unix.ERANGE):
		return http.StatusInsufficientStorage, "a property does not fit at the destination"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; the temp copy is already removed.
		return http.StatusServiceUnavailable, "request cancelled"
	}
	return s.fsStatus(r, err)
}

// copier copies one source tree.
type copier struct {
	s         *Server
	ctx       context.Context
	infinite  bool         // copy members too (Depth infinity)
	top       string       // the temp name of the copy's top entry
	ancestors []fileID     // source collections being copied, outermost first
	sums      []copiedSums // to keep once the copy is in place
}

// copy copies the source at srcRel (st: symlinks followed) to the new
// entry name of directory dstDir.
func (c *copier) copy(srcRel string, st *unix.Stat_t, dstDir int, name string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if isDir(st) {
		return c.copyDir(srcRel, dstDir, name)
	}
	return c.copyFile(srcRel, dstDir, name)
}

// copyFile writes the file at srcRel to the new file name in dstDir, with
// its dead properties and kept checksums, and fsyncs it. The copy gets the
// permission bits only: a setuid file copied by a server running as root
// must not become a setuid-root file.
func (c *copier) copyFile(srcRel string, dstDir int, name string) error {
	// O_NONBLOCK: a FIFO swapped in since the stat must not hang us.
	in, err := c.s.openRel(srcRel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return err
	}
	defer in.Close()
	ifd := int(in.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(ifd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: srcRel, Err: err}
	}
	if !isReg(&st) {
		return &os.PathError{Op: "open", Path: srcRel, Err: unix.ENOENT}
	}
	sums := c.s.copySums(&st)
	ofd, err := unix.Openat(dstDir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, st.Mode&0o777)
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	out := os.NewFile(uintptr(ofd), name)
	defer out.Close()
	if err := copyData(c.ctx, out, in); err != nil {
		return err
	}
	if err := copyDeadProps(ifd, ofd); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	var after, ost unix.Stat_t
	if len(sums) > 0 && unix.Fstat(ifd, &after) == nil && keptsum.SameVersion(&st, &after) && unix.Fstat(ofd, &ost) == nil {
		c.sums = append(c.sums, copiedSums{st: ost, sums: sums, top: name == c.top})
	}
	return out.Close()
}

// copiedSums are the kept checksums of a source file, for its copy.
type copiedSums struct {
	st   unix.Stat_t // the copy, complete
	sums map[string]string
	top  bool // the copy is the entry COPY renames into place
}

// keepSums keeps the checksums of the copied files once the copy is in
// place as name in directory dir. Members keep the fingerprint they had;
// the top entry was renamed, which moved its ctime, so its fingerprint is
// taken again (and nothing is kept if anything else changed).
func (c *copier) keepSums(dir int, name string) {
	for _, cs := range c.sums {
		st := cs.st
		if cs.top {
			var now unix.Stat_t
			if unix.Fstatat(dir, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil ||
				now.Ino != st.Ino || now.Size != st.Size || now.Mtim != st.Mtim {
				continue
			}
			st = now
		}
		if c.s.storeSums(&st, cs.sums) != nil {
			return // no room: later requests compute them
		}
	}
}

// copyData copies in to out with copy_file_range (os.File.ReadFrom),
// checking ctx between chunks.
func copyData(ctx context.Context, out, in *os.File) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := io.CopyN(out, in, copyChunk)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// copyDir makes the new directory name in dstDir with the dead properties
// of the source collection at srcRel and, for Depth infinity, copies its
// members into it.
func (c *copier) copyDir(srcRel string, dstDir int, name string) error {
	d, err := c.s.openRel(srcRel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: srcRel, Err: err}
	}
	id := idOf(&st)
	if slices.Contains(c.ancestors, id) {
		return errLoop
	}
	var names []string
	if c.infinite {
		if names, err = d.Readdirnames(-1); err != nil {
			return err
		}
	}
	if err := unix.Mkdirat(dstDir, name, st.Mode&0o777); err != nil {
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	fd, err := unix.Openat(dstDir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	out := os.NewFile(uintptr(fd), name)
	defer out.Close()
	if err := copyDeadProps(int(d.Fd()), fd); err != nil {
		return err
	}
	d.Close() // one descriptor per level is enough
	c.ancestors = append(c.ancestors, id)
	defer func() { c.ancestors = c.ancestors[:len(c.ancestors)-1] }()
	for _, n := range names {
		if err := c.copyMember(path.Join(srcRel, n), fd, n); err != nil {
			return err
		}
	}
	return out.Sync()
}

// copyMember copies one member of a collection. Members that are no
// WebDAV resource are left out, as PROPFIND leaves them out: the server's
// own temp files, symlinks that lead outside Root, nowhere or round in
// circles, and anything neither file nor directory.
func (c *copier) copyMember(srcRel string, dstDir int, name string) error {
	if strings.HasPrefix(name, reservedPrefix) {
		return nil
	}
	var st unix.Stat_t
	if err := c.s.statRel(srcRel, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) || isEscape(err) {
			return nil
		}
		return err
	}
	if !isDir(&st) && !isReg(&st) {
		return nil
	}
	return c.copy(srcRel, &st, dstDir, name)
}

// copyDeadProps copies the dead properties (davfs.go's xattrs) of the
// open file or directory from to to. Without user xattrs on either side
// there are none to copy, as PROPPATCH could not have set them.
func copyDeadProps(from, to int) error {
	names, err := listXattrs(from)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		return &os.PathError{Op: "listxattr", Path: "", Err: err}
	}
	for _, n := range names {
		if !strings.HasPrefix(n, propXattrPrefix) {
			continue
		}
		v, err := getXattr(from, n)
		if err != nil {
			continue // removed meanwhile
		}
		if err := unix.Fsetxattr(to, n, v, 0); err != nil {
			if errors.Is(err, unix.ENOTSUP) {
				return nil
			}
			return &os.PathError{Op: "setxattr", Path: n, Err: err}
		}
	}
	return nil
}
