package buffer

import (
	"context"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// migration is one migration of an entry in flight, as pick made it.
//
// Stopping a copy is safe only while its target cannot commit it: until
// the last byte of the file has been handed to the target's Put, the
// target holds less than the size it was told, and every kind commits
// nothing short of it (HTTP and S3 with Content-Length, posix and root://
// through a temporary file). Once the last byte went, the target may
// commit whatever this side does: cancelling would only leave the outcome
// unknown, and a DELETE or a newer version sent next could reach the
// target before that commit and be undone by it. So from then on the
// migration is left to finish and see its answer, and what comes next
// for the path waits for it (Buffer.moving). A pending delete's request
// is never stopped, for the same reason.
type migration struct {
	cancel context.CancelFunc
	mu     sync.Mutex // guards the fields below
	// handed: the last byte went to a target (or a delete was sent).
	handed bool
	// aborted: stopped before that; no last byte will go.
	aborted bool
}

// abort stops the migration unless a target may already commit it.
func (m *migration) abort() {
	m.mu.Lock()
	if m.handed {
		m.mu.Unlock()
		return
	}
	m.aborted = true
	m.mu.Unlock()
	m.cancel()
}

// handOver is asked before the last bytes of the file go to a target: it
// refuses when the migration was stopped, else marks it past stopping.
func (m *migration) handOver() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.aborted {
		return errAborted
	}
	m.handed = true
	return nil
}

// answered is called when a copy's target answered: the next target's
// copy may be stopped again until its own last byte.
func (m *migration) answered() {
	m.mu.Lock()
	m.handed = false
	m.mu.Unlock()
}

// errAborted fails the read of a copy stopped by a newer version or a
// DELETE, so that the target never gets the whole file.
var errAborted = fmt.Errorf("buffer: migration stopped by a newer version or a delete: %w", endpoint.ErrUnavailable)

// DamageError says a buffered file's bytes on the local disk are no
// longer those acknowledged: a read of the whole spool file gave another
// adler32 (or length) than the journal's.
type DamageError struct {
	Path, Spool string
	Got, Want   string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("buffer: spool file %s of %s is damaged: adler32 %s, acknowledged %s", e.Spool, e.Path, e.Got, e.Want)
}

// Unwrap makes a damaged file unavailable to a reader, not missing.
func (e *DamageError) Unwrap() error { return endpoint.ErrUnavailable }

// sumCheck checks a read of a whole spool file against the adler32 the
// journal keeps, which is what was acknowledged. It costs no extra I/O:
// the sum is computed on the bytes as they pass, and the last bytes are
// held back until it matches, so that neither a client nor a target ever
// receives the whole of a file that rotted on the local disk (a client
// sees its body cut short; a target commits nothing short of its
// length). Ranged reads are not checked: that would need the whole file
// read for every range.
type sumCheck struct {
	b    *Buffer
	e    *entry
	h    hash.Hash32
	left int64
	// gate, when set, is asked before the last bytes go (a migration's
	// handOver).
	gate func() error
	done bool
	err  error
}

func (b *Buffer) newSumCheck(e *entry, gate func() error) *sumCheck {
	return &sumCheck{b: b, e: e, h: httpx.NewAdler32(), left: e.size, gate: gate}
}

// read reads r (positioned where the check is) into p, checking the sum
// before the read that ends the file returns.
func (c *sumCheck) read(r io.Reader, p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := r.Read(p)
	c.h.Write(p[:n])
	c.left -= int64(n)
	switch {
	case c.done:
	case c.left == 0:
		c.done = true
		if got := httpx.SumString(c.h); got != c.e.adler {
			c.err = c.b.damaged(c.e, got)
			return 0, c.err
		}
		if c.gate != nil {
			if gerr := c.gate(); gerr != nil {
				c.err = gerr
				return 0, c.err
			}
		}
	case err == io.EOF:
		// Shorter than acknowledged: truncated on disk.
		c.err = c.b.damaged(c.e, fmt.Sprintf("(%d bytes short)", c.left))
		return 0, c.err
	}
	return n, err
}

// damaged records that e's spool file no longer holds what was
// acknowledged, loudly (an error log, a failure in Status and the journal,
// lakefed_buffer_failures_total{reason="spool_damaged"}), and returns the
// error for the reader. What then happens to e:
//
//   - pending: it stays pending and journaled, but is neither migrated
//     (the targets would keep the wrong bytes under the right name) nor
//     served (its Info is still listed: the acknowledged file exists, its
//     bytes are unreadable). The acknowledged bytes exist nowhere else,
//     so nothing is dropped silently: the operator sees it in lakefed
//     buffer status, and a new PUT or a DELETE of the path ends it.
//   - migrated: every target holds a verified copy, so the local copy is
//     retired at once and reads go to the targets.
func (b *Buffer) damaged(e *entry, got string) error {
	derr := &DamageError{Path: e.path, Spool: e.spool, Got: got, Want: e.adler}
	b.mu.Lock()
	first := e.damaged == ""
	if first {
		e.damaged = short(derr.Error())
		e.failedAt = time.Now()
		if e.failingSince.IsZero() {
			e.failingSince = e.failedAt
		}
	}
	migrated := b.startRetireLocked(e)
	attempts, msg, since := e.attempts, e.damaged, e.failingSince
	b.mu.Unlock()
	if !first {
		return derr
	}
	b.m.failures.WithLabelValues("buffer", reasonDamaged).Inc()
	if migrated {
		b.log.Error("buffered file damaged on the local disk: retired, the targets' verified copies are read", "path", e.path,
			"spool", e.spool, "adler32", got, "want", e.adler)
		b.retire(context.Background(), e, "damaged")
		return derr
	}
	b.log.Error("buffered file damaged on the local disk: neither served nor migrated, its acknowledged bytes are lost; "+
		"PUT it again or DELETE it", "path", e.path, "spool", e.spool, "adler32", got, "want", e.adler)
	if err := b.j.failed(context.Background(), e.seq, attempts, msg, since); err != nil {
		b.log.Error("journal a failure", "path", e.path, "err", err)
	}
	return derr
}

// reasonDamaged is the failure reason of a damaged spool file.
const reasonDamaged = "spool_damaged"

// spoolReader reads a range of a spool file; it says which version. A
// read of the whole file is checked (check).
type spoolReader struct {
	f     *os.File
	r     io.Reader
	ver   endpoint.Info
	check *sumCheck // nil: a range, not checked
}

func (r *spoolReader) Read(p []byte) (int, error) {
	if r.check == nil {
		return r.r.Read(p)
	}
	return r.check.read(r.r, p)
}

func (r *spoolReader) Close() error           { return r.f.Close() }
func (r *spoolReader) Version() endpoint.Info { return r.ver }

// checkedRead is a whole read of a spool file, checked by its sumCheck.
type checkedRead struct {
	c *sumCheck
	r io.Reader
}

func (c *checkedRead) Read(p []byte) (int, error) { return c.c.read(c.r, p) }
