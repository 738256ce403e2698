// Package buffer is the write buffer role: a PUT under a buffered prefix
// lands on fast local disk, is acknowledged only once it is durable and
// journaled, and a mover copies it in the background to every target of
// its prefix, verifies size and adler32 there, and only then lets the
// local copy go. Until then the buffer answers reads of the file itself,
// so a client never sees an acknowledged file vanish or show old bytes.
// A DELETE of a file it holds is journaled the same way and carried to
// every target by the mover.
//
// The Russian data-lake prototype buffered on EOS disks and migrated with
// EOS's converter: uploads were 1.8× faster, but about 10 % of the files
// were never migrated. Here every state change is a committed row of a
// SQLite journal (journal.go) before anything depends on it, and a kill -9
// at any point loses no acknowledged file (TestCrashLoop).
//
//	b, err := buffer.New(ctx, buffer.Config{Dir: "/var/spool/lakefed", MaxBytes: 500 << 30,
//		Prefixes: []buffer.Prefix{{Prefix: "/store/user", Targets: []endpoint.Endpoint{siteA}}}}, buffer.Options{})
//	go b.Run(ctx)                      // the mover and the retirer
//	mux.Handle("/", b.Wrap(federator)) // PUTs under /store/user land here
//	defer b.Close()
package buffer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/durable"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// What Config.WhenFull may say.
const (
	// WhenFullReject answers 507 Insufficient Storage (RFC 4918 §11.5).
	WhenFullReject = "reject"
	// WhenFullDirect answers 307 to the first target's redirect URL for
	// the path, so the client writes there itself; 507 when that target
	// has none (a local directory).
	WhenFullDirect = "direct"
)

// Defaults for zero fields of Config.
const (
	DefaultParallel     = 4
	DefaultRetryInitial = time.Second
	DefaultRetryMax     = 5 * time.Minute
)

// Prefix is one buffered part of the namespace and where its files go.
type Prefix struct {
	// Prefix is a clean absolute path ("/store/user"); it matches itself
	// and the paths below it, by whole segments. The most specific prefix
	// of a path places it.
	Prefix string
	// Targets receive every file written under Prefix (replicas: all of
	// them, not one). A file is written on each at the path the client
	// used. Their Names identify them in the journal, so they must be
	// unique and stable across restarts.
	Targets []endpoint.Endpoint
}

// Config is one buffer. The YAML shape (`buffer:` in lakefed's config) is
// the lead's; package server maps it here, with target names resolved
// to endpoints.
type Config struct {
	// Dir holds the journal (journal.db), uploads in progress (tmp/) and
	// complete files (data/). It is created when missing; one buffer at a
	// time may use it (a lock file says so). Required.
	Dir string
	// MaxBytes bounds the bytes held in Dir (pending files, migrated
	// files kept, uploads in progress). Zero: only the disk's free space
	// bounds it.
	MaxBytes int64
	// KeepAfterMigration is how long a migrated file stays to be read
	// locally; it goes sooner when the space is needed. Zero: it goes as
	// soon as every target has verified it.
	KeepAfterMigration time.Duration
	// Parallel is how many files migrate at once. Zero: DefaultParallel.
	Parallel int
	// RetryInitial is the wait after a file's first failed migration;
	// it doubles on every failure up to RetryMax, with jitter. Zero:
	// DefaultRetryInitial, DefaultRetryMax.
	RetryInitial, RetryMax time.Duration
	// WhenFull is WhenFullReject ("" means it) or WhenFullDirect.
	WhenFull string
	// Prefixes are the buffered parts of the namespace; at least one.
	Prefixes []Prefix
}

// Options are the parts of a buffer that do not come from the config.
type Options struct {
	// Log receives state changes and failures. Nil: slog.Default().
	Log *slog.Logger
	// Registerer gets the lakefed_buffer_* metrics. Nil: none exported.
	Registerer prometheus.Registerer
	// OnWrite, when set, is the process's write hook: it is called with
	// a path when the buffer has taken a write or a DELETE of it (before
	// the writer's answer), and when it stops answering for it (its local
	// copy is retired, or its pending delete carried out), so that the
	// federator and the cache drop what they hold of the path (a "not
	// found" cached before the file was written would otherwise hide the
	// migrated replicas; cached blocks would be of the old version), and
	// the processes sharing state with this one too. Its error says they
	// could not be told: a write is then answered 503 (taken here; the
	// client writes again).
	OnWrite func(ctx context.Context, path string) error
	// Lake, when set, is how the other processes of a lake learn which
	// paths this buffer answers for (lake.go). Nil: it is alone.
	Lake Lake
	// MayList reports whether the caller of r may list the path p (the
	// auth rules' list permission). GET /api/buffer lists only the
	// failures of the files it allows, since the operator's pages pass
	// the auth rules unguarded. Nil: every failure is listed.
	MayList func(r *http.Request, p string) bool
}

// Buffer is a running write buffer. Its methods and handlers may be used
// concurrently.
type Buffer struct {
	cfg  Config
	opts Options
	log  *slog.Logger
	j    *journal
	lock *os.File // holds the flock on Dir/lock
	m    *metrics

	tmpDir, dataDir string
	targets         map[string]endpoint.Endpoint // by Name, across prefixes

	wake   chan struct{} // a file became pending: the mover looks again
	stop   context.CancelFunc
	life   context.Context // done on Close
	runs   sync.WaitGroup  // Run, while it runs
	paths  pathLocks       // one PUT of a path at a time (accept.go)
	resync resync          // the lake's holds are to be made to agree (lake.go)

	mu sync.Mutex // guards everything below
	// cur is the newest version of every path the buffer holds (pending,
	// or migrated and kept).
	cur map[string]*entry
	// moving holds the paths with a copy in flight, of whatever version.
	moving map[string]bool
	// down holds the targets found unavailable, by name, until when no
	// copy is sent to them (one probing copy then goes): a target that is
	// down costs one failed copy per backoff, not one per pending file.
	down map[string]*hold
	// used is the bytes of complete spool files on disk, superseded ones
	// not yet removed included; reserved the bytes promised to uploads in
	// progress.
	used, reserved int64
	stats          stats
	history        ring
	closed         bool
}

// spool names a complete file in data/: random, so a name is never
// reused, whatever the journal holds.
func newSpoolName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Errors of New.
var (
	ErrConfig = errors.New("buffer: bad config")
	ErrInUse  = errors.New("buffer: directory in use by another buffer")
)

// validate fills defaults and returns every problem at once.
func (c *Config) validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("dir is empty"))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, errors.New("max_bytes is negative"))
	}
	if c.KeepAfterMigration < 0 {
		errs = append(errs, errors.New("keep_after_migration is negative"))
	}
	if c.Parallel < 0 {
		errs = append(errs, errors.New("parallel is negative"))
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultParallel
	}
	if c.RetryInitial < 0 || c.RetryMax < 0 {
		errs = append(errs, errors.New("retry durations are negative"))
	}
	if c.RetryInitial == 0 {
		c.RetryInitial = DefaultRetryInitial
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.RetryMax < c.RetryInitial {
		c.RetryMax = c.RetryInitial
	}
	switch c.WhenFull {
	case "":
		c.WhenFull = WhenFullReject
	case WhenFullReject, WhenFullDirect:
	default:
		errs = append(errs, fmt.Errorf("when_full %q: want reject or direct", c.WhenFull))
	}
	if len(c.Prefixes) == 0 {
		errs = append(errs, errors.New("no prefixes"))
	}
	names := map[string]endpoint.Endpoint{}
	seen := map[string]bool{}
	for i, p := range c.Prefixes {
		clean, err := httpx.CleanPath(p.Prefix)
		if err != nil || clean != p.Prefix || p.Prefix == "" {
			errs = append(errs, fmt.Errorf("prefix %q is not a clean absolute path", p.Prefix))
		}
		if seen[p.Prefix] {
			errs = append(errs, fmt.Errorf("prefix %q given twice", p.Prefix))
		}
		seen[p.Prefix] = true
		if len(p.Targets) == 0 {
			errs = append(errs, fmt.Errorf("prefix %q has no targets", p.Prefix))
		}
		for _, t := range p.Targets {
			if t == nil {
				errs = append(errs, fmt.Errorf("prefix %q: nil target", p.Prefix))
				continue
			}
			if old, ok := names[t.Name()]; ok && old != t {
				errs = append(errs, fmt.Errorf("prefix %q: two targets named %q", c.Prefixes[i].Prefix, t.Name()))
			}
			names[t.Name()] = t
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// New opens the buffer in cfg.Dir, recovering what a previous run left
// (see recover): uploads in progress are removed, acknowledged files are
// queued again. It does not migrate anything until Run.
func New(ctx context.Context, cfg Config, opts Options) (*Buffer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	b := &Buffer{
		cfg:     cfg,
		opts:    opts,
		log:     opts.Log.With("component", "buffer"),
		tmpDir:  filepath.Join(cfg.Dir, "tmp"),
		dataDir: filepath.Join(cfg.Dir, "data"),
		targets: map[string]endpoint.Endpoint{},
		wake:    make(chan struct{}, 1),
		cur:     map[string]*entry{},
		moving:  map[string]bool{},
		down:    map[string]*hold{},
		history: newRing(historyLen),
	}
	b.stats.init()
	for _, p := range cfg.Prefixes {
		for _, t := range p.Targets {
			b.targets[t.Name()] = t
		}
	}
	for _, d := range []string{cfg.Dir, b.tmpDir, b.dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("buffer: %w", err)
		}
	}
	// data/ must itself survive a power cut, or the files in it go with it.
	if err := durable.SyncDir(cfg.Dir); err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrInUse, cfg.Dir, err)
	}
	b.lock = lock
	if b.j, err = openJournal(ctx, filepath.Join(cfg.Dir, "journal.db")); err != nil {
		lock.Close()
		return nil, err
	}
	if err := b.recover(ctx); err != nil {
		b.j.close()
		lock.Close()
		return nil, err
	}
	if b.m, err = newMetrics(b, opts.Registerer); err != nil {
		b.j.close()
		lock.Close()
		return nil, err
	}
	b.life, b.stop = context.WithCancel(context.WithoutCancel(ctx))
	return b, nil
}

// recover makes Dir agree with the journal after a stop of any kind.
// Uploads in progress (tmp/) were never acknowledged: removed. A spool
// file with no row was renamed but not journaled (not acknowledged), or
// its row was retired or superseded before the file went: removed. A row
// whose file is missing cannot happen (the file is fsynced and renamed,
// and the directory fsynced, before the row is committed); it is logged
// as the loss it would be and dropped, so that it does not retry forever.
// Pending rows are queued again with no wait; targets they had verified
// stay verified. Pending deletes (which have no file) are queued again
// too, with the targets they were carried out on kept.
func (b *Buffer) recover(ctx context.Context) error {
	if err := removeAll(b.tmpDir); err != nil {
		return fmt.Errorf("buffer: recover: %w", err)
	}
	rows, err := b.j.load(ctx)
	if err != nil {
		return err
	}
	bySpool := map[string]*entry{}
	now := time.Now()
	for _, e := range rows {
		bySpool[e.spool] = e
		if e.lastErr != "" && e.state != stateMigrated && e.failingSince.IsZero() {
			// A journal from before failing_since keeps the failure but
			// not its time: failing since the restart, which
			// understates and never overstates.
			e.failingSince = now
		}
	}
	ents, err := os.ReadDir(b.dataDir)
	if err != nil {
		return fmt.Errorf("buffer: recover: %w", err)
	}
	onDisk := map[string]int64{}
	removed := 0
	for _, de := range ents {
		if _, ok := bySpool[de.Name()]; !ok {
			if err := os.Remove(filepath.Join(b.dataDir, de.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("buffer: recover: %w", err)
			}
			removed++
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return fmt.Errorf("buffer: recover: %w", err)
		}
		onDisk[de.Name()] = fi.Size()
	}
	if removed > 0 {
		if err := durable.SyncDir(b.dataDir); err != nil {
			return fmt.Errorf("buffer: recover: %w", err)
		}
	}
	pending, deletes := 0, 0
	for _, e := range rows {
		if e.deleting() {
			if old := b.cur[e.path]; old == nil || old.seq < e.seq {
				b.cur[e.path] = e
				deletes++
			}
			continue
		}
		size, ok := onDisk[e.spool]
		if !ok || size != e.size {
			b.log.ErrorContext(ctx, "journaled file missing from the spool: dropped", "path", e.path,
				"seq", e.seq, "spool", e.spool, "bytes", e.size, "on_disk", size)
			if err := b.j.remove(ctx, e.seq); err != nil {
				return err
			}
			continue
		}
		if old := b.cur[e.path]; old != nil {
			// Two rows for one path cannot be (an insert deletes the older
			// in its transaction); keep the newer all the same.
			if old.seq > e.seq {
				continue
			}
		}
		b.cur[e.path] = e
		b.used += e.size
		if e.state == statePending {
			pending++
		}
	}
	if removed > 0 || pending > 0 || deletes > 0 {
		b.log.InfoContext(ctx, "buffer recovered", "pending", pending, "pending_deletes", deletes,
			"held", len(b.cur)-deletes, "orphans_removed", removed)
	}
	return nil
}

// removeAll empties dir, keeping dir.
func removeAll(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range ents {
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Close stops Run (and waits for it), then closes the journal. Uploads
// still in progress fail cleanly: nothing is acknowledged once the
// journal is closed.
func (b *Buffer) Close() error {
	b.stop()
	b.runs.Wait()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	if b.m != nil {
		b.m.unregister()
	}
	err := b.j.close()
	if cerr := b.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// prefixOf returns the most specific buffered prefix of the clean path p,
// or nil.
func (b *Buffer) prefixOf(p string) *Prefix {
	var best *Prefix
	for i := range b.cfg.Prefixes {
		pr := &b.cfg.Prefixes[i]
		if under(p, pr.Prefix) && (best == nil || len(pr.Prefix) > len(best.Prefix)) {
			best = pr
		}
	}
	return best
}

// Holds returns the buffered prefix p is under, or "". With tree it also
// returns one below p: a directory whose move would take buffered files
// along. A rename, truncate or chmod there is refused, over HTTP (Wrap)
// and at the root:// door: a file may not have reached its endpoint yet,
// and the federator would change an older copy on a target, or put the
// file where the buffer never migrates it.
func (b *Buffer) Holds(p string, tree bool) string {
	for _, pr := range b.cfg.Prefixes {
		if under(p, pr.Prefix) || tree && under(pr.Prefix, p) {
			return pr.Prefix
		}
	}
	return ""
}

// under reports whether the clean path p is prefix or below it, by whole
// segments ("/a/bc" is not under "/a/b").
func under(p, prefix string) bool {
	if prefix == "/" || p == prefix {
		return true
	}
	return strings.HasPrefix(p, prefix) && p[len(prefix)] == '/'
}

// spoolPath is where e's bytes are.
func (b *Buffer) spoolPath(e *entry) string { return filepath.Join(b.dataDir, e.spool) }

// parentOf is path.Dir for clean absolute paths.
func parentOf(p string) string { return path.Dir(p) }
