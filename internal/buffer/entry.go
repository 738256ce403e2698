package buffer

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// entry is one version of one path, mirroring its journal row: a file
// (pending or migrated), or a pending delete (stateDeleting: no spool
// file; the mover deletes the path on every target, then the row goes).
// Fields after the row's are guarded by Buffer.mu.
type entry struct {
	seq        int64
	path       string
	spool      string
	size       int64
	adler      string
	md5        string // "" unless the client asked for or sent one
	mtime      time.Time
	state      int
	migratedAt time.Time
	targets    []string        // endpoint names, in config order
	done       map[string]bool // targets holding a verified copy
	attempts   int
	lastErr    string

	nextTry    time.Time
	failTarget string // the target of the last failure
	failReason string // its reason label
	failedAt   time.Time
	// failingSince is when the failures that last attempt continues
	// began (the first one since the entry was acknowledged; the
	// journal keeps it across restarts): zero while its last attempt
	// did not fail.
	failingSince time.Time

	// refs counts readers of the spool file and the mover's copy; the
	// file is removed only at zero.
	refs int
	// gone: no longer the path's version (superseded, retired, deleted);
	// the file goes once refs is zero.
	gone    bool
	removed bool
	// mig is the entry's migration in flight; nil when none.
	mig *migration
	// retiring: a retirement is committing; not picked again.
	retiring bool
	// released: a migrated version whose hold in the lake is dropped (or
	// being dropped) on its way out: it is read from the targets, as the
	// lake's readers read it, and not from here (retire).
	released bool
	// damaged says why the spool file no longer holds the acknowledged
	// bytes (a whole read found another adler32), or "": such a file is
	// neither served nor migrated (spool.go).
	damaged string
}

// deleting reports whether e is a pending delete rather than a file.
func (e *entry) deleting() bool { return e.state == stateDeleting }

// info describes e as an endpoint would.
func (e *entry) info() endpoint.Info {
	sums := map[string]string{httpx.Adler32: e.adler}
	if e.md5 != "" {
		sums[httpx.MD5] = e.md5
	}
	// Strong: the tag names the version and its adler32 (etag).
	return endpoint.Info{Name: baseName(e.path), Size: e.size, ModTime: e.mtime, ETag: e.etag(), Strong: true, Checksums: sums}
}

// etag is e's entity tag without quotes: the version and its sum, so a
// new version of the same path never shares one.
func (e *entry) etag() string { return "lfb-" + strconv.FormatInt(e.seq, 36) + "-" + e.adler }

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// acquire returns the current version of p with a reference the caller
// must release, or nil.
func (b *Buffer) acquire(p string) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.cur[p]
	if e == nil || e.deleting() || e.released {
		return nil
	}
	e.refs++
	return e
}

// open opens e's spool file for a reader that acquired it.
func (b *Buffer) open(e *entry) (*os.File, error) { return os.Open(b.spoolPath(e)) }

// release drops a reference taken by acquire, removing the file of a
// version that is gone once nobody reads it.
func (b *Buffer) release(e *entry) {
	b.mu.Lock()
	e.refs--
	rm := e.gone && e.refs == 0 && !e.removed && !e.deleting()
	if rm {
		e.removed = true
	}
	b.mu.Unlock()
	if rm {
		b.removeSpool(e)
	}
}

// dropLocked marks e gone (its row is deleted) and reports whether the
// caller must remove its file now (nobody reads it).
func (b *Buffer) dropLocked(e *entry) bool {
	if b.cur[e.path] == e {
		delete(b.cur, e.path)
	}
	e.gone = true
	if e.mig != nil {
		e.mig.abort()
	}
	if e.deleting() {
		return false // no file
	}
	if e.refs == 0 && !e.removed {
		e.removed = true
		return true
	}
	return false
}

// removeSpool removes e's file and gives its bytes back. The directory
// is fsynced lazily: a removal lost in a crash leaves a file without a
// row, which recovery removes.
func (b *Buffer) removeSpool(e *entry) {
	if err := os.Remove(b.spoolPath(e)); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.log.Error("remove spool file", "path", e.path, "spool", e.spool, "err", err)
	}
	b.mu.Lock()
	b.used -= e.size
	b.mu.Unlock()
}

// install makes the journaled e the current version of its path and
// returns the versions it replaced, whose rows the insert deleted. Two
// PUTs of one path commit in seq order but may get here in the other:
// the lower seq then loses at once.
func (b *Buffer) install(e *entry) {
	var rm []*entry
	b.mu.Lock()
	b.used += e.size
	if old := b.cur[e.path]; old != nil && old.seq > e.seq {
		if b.dropLocked(e) {
			rm = append(rm, e)
		}
	} else {
		if old != nil && b.dropLocked(old) {
			rm = append(rm, old)
		}
		b.cur[e.path] = e
	}
	b.mu.Unlock()
	for _, o := range rm {
		b.removeSpool(o)
	}
	b.kick()
}

// kick wakes the mover.
func (b *Buffer) kick() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// reservation is space promised to one upload in progress.
type reservation struct {
	b *Buffer
	n int64
}

// errFull says the buffer cannot take the bytes.
var errFull = errors.New("buffer: full")

// reserve promises n bytes to an upload, retiring migrated files early
// when that makes room. It fails with errFull when neither MaxBytes nor
// the disk's free space allows n.
func (b *Buffer) reserve(ctx context.Context, n int64) (*reservation, error) {
	r := &reservation{b: b}
	if err := r.grow(ctx, n); err != nil {
		return nil, err
	}
	return r, nil
}

// grow adds n bytes to r.
func (r *reservation) grow(ctx context.Context, n int64) error {
	b := r.b
	for {
		b.mu.Lock()
		fits := b.cfg.MaxBytes == 0 || b.used+b.reserved+n <= b.cfg.MaxBytes
		if fits && b.diskHasLocked(n) {
			b.reserved += n
			r.n += n
			b.mu.Unlock()
			return nil
		}
		victim := b.oldestMigratedLocked()
		b.mu.Unlock()
		if victim == nil {
			return errFull
		}
		// Retiring early is allowed once every target holds a verified
		// copy: the journal refuses to retire a pending row. A retirement
		// that did not happen ends the attempt (no loop on a failing
		// journal).
		if !b.retire(ctx, victim, "space") {
			return errFull
		}
	}
}

// diskHasLocked reports whether the file system of Dir has room for n
// more bytes beside what uploads in progress were promised.
func (b *Buffer) diskHasLocked(n int64) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(b.cfg.Dir, &st); err != nil {
		return true // cannot tell: MaxBytes and the write itself decide
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	return avail-b.reserved >= n
}

// oldestMigratedLocked returns the migrated version held longest since
// its migration, not already retiring, or nil.
func (b *Buffer) oldestMigratedLocked() *entry {
	var best *entry
	for _, e := range b.cur {
		if e.state == stateMigrated && !e.retiring && (best == nil || e.migratedAt.Before(best.migratedAt)) {
			best = e
		}
	}
	if best != nil && !b.startRetireLocked(best) {
		return nil
	}
	return best
}

// done gives r's promise back: the bytes are either in a spool file
// (install counted them) or gone.
func (r *reservation) done() {
	r.b.mu.Lock()
	r.b.reserved -= r.n
	r.n = 0
	r.b.mu.Unlock()
}

// startRetire marks e, a migrated version, as being retired, and reports
// whether the caller is to retire it (retire, which clears the mark when
// it cannot): false when another retirement is under way, or e is no
// longer current. The one place the mark is set, so that whoever sets it
// retires that same entry at once.
func (b *Buffer) startRetire(e *entry) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.startRetireLocked(e)
}

// startRetireLocked is startRetire with b.mu held.
func (b *Buffer) startRetireLocked(e *entry) bool {
	if e.state != stateMigrated || e.retiring || e.gone || b.cur[e.path] != e {
		return false
	}
	e.retiring = true
	return true
}

// retire removes the migrated e: its hold in the lake first, then the
// row (durable), then the file. A row that is not migrated after all is
// left alone. It reports whether e was retired.
//
// From the moment its hold goes, a write of the path through another
// process of the lake goes to the targets, no longer here: so e is read
// from the targets (released) before the hold is dropped, and this
// process never serves it after such a write. The targets hold verified
// copies of it until then.
func (b *Buffer) retire(ctx context.Context, e *entry, why string) bool {
	if lake := b.opts.Lake; lake != nil {
		b.mu.Lock()
		e.released = true
		b.mu.Unlock()
		if err := lake.Release(context.WithoutCancel(ctx), e.path, e.seq); err != nil {
			b.log.Warn("a migrated file stays: the other processes of the lake could not be told it is on its targets",
				"path", e.path, "err", err)
			b.mu.Lock()
			e.released, e.retiring = false, false
			b.mu.Unlock()
			return false
		}
	}
	ok, err := b.j.retire(context.WithoutCancel(ctx), e.seq)
	if err != nil {
		b.log.Error("retire", "path", e.path, "err", err)
	}
	b.mu.Lock()
	e.retiring = false
	rm := false
	if ok {
		rm = b.dropLocked(e)
	}
	b.mu.Unlock()
	if !ok {
		return false
	}
	b.log.Debug("retired", "path", e.path, "why", why)
	if rm {
		b.removeSpool(e)
	}
	if err := b.wrote(ctx, e.path); err != nil {
		b.log.Warn("a retired file could not be shown to the other processes of the lake", "path", e.path, "err", err)
	}
	return true
}
