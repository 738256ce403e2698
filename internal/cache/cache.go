// Package cache is lakefed's cache role: a read-through block cache on
// local disk near the CPUs, in front of any origin lakefed reads (an
// HTTP/WebDAV server, S3, root://, another federator, or the federation
// in the same process). It does what XCache does, without the faults its
// users report:
//
//   - Fill: missing blocks come from the origin as one range read per run
//     of adjacent missing blocks; concurrent readers of a missing block
//     wait for the one fetch; a reader waits for the blocks it needs, not
//     for the file; a sequential reader makes the cache read ahead.
//   - Never stale: the origin's size, ETag and modification time are
//     recorded and checked again after RevalidateAfter (at once with
//     Cache-Control: no-cache); every range read from the origin must say
//     it is of the same version (endpoint.Versioned). A changed file
//     drops its blocks.
//   - Never corrupt: each block's CRC-32C is kept and checked on every
//     read, so a block that rotted on disk is fetched again, never
//     served; a complete file is checked against the origin's adler32.
//   - Purge: by bytes and by inodes, least recently used whole files
//     first, never a file being read; a disk that cannot keep up makes
//     readers stream from the origin uncached instead of queueing.
//   - Group: several nodes split the namespace by rendezvous hashing, so
//     a site keeps one copy of each file (group.go).
//   - Patterns: how each file is read (pattern.go), at /api/cache/files.
//
// The layout on disk is in file.go.
package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Config is the cache role's settings, in plain types; package server
// maps the YAML section onto it. Zero values take the defaults below.
type Config struct {
	// Dir holds the cached files. Required.
	Dir string
	// MaxBytes and MaxInodes bound the disk used: bytes of blocks, and
	// files on disk (two per cached file: data and block map). Zero:
	// 90 % of the file system's size and of its inodes.
	MaxBytes  int64
	MaxInodes int64
	// HighWatermark and LowWatermark are fractions of the bounds: a purge
	// starts above the high one and stops below the low one. Default
	// 0.95 and 0.90.
	HighWatermark, LowWatermark float64
	// BlockSize is the unit of fill and of checking. Default 1 MiB.
	BlockSize int64
	// PrefetchBlocks is how far ahead of a sequential reader blocks are
	// fetched. Default 8; negative: none.
	PrefetchBlocks int
	// RAM is the memory kept for recently read blocks, already checked.
	// Default 256 MiB; negative: none.
	RAM int64
	// RevalidateAfter is how long the origin's description of a file is
	// trusted before it is asked again. Default 5m.
	RevalidateAfter time.Duration
	// MaxFills bounds the origin reads filling the disk at once (a fill
	// paused for a slow reader counts as none); a reader that would need
	// one more streams from the origin uncached (back pressure). Default
	// 32.
	MaxFills int
	// Group lists the base URLs of every node of the cache group, this
	// one included (Self). Empty: no group.
	Group []string
	// Self is this node's base URL as it appears in Group.
	Self string
	// RetryAfter is sent with a 503. Default 10s.
	RetryAfter time.Duration
	// OriginIdleTimeout is how long a fill waits for the origin's next
	// bytes before it reopens the read (a stalled server). Default 5s,
	// as the federator's proxy_idle_timeout.
	OriginIdleTimeout time.Duration
	// MaxFillPause bounds how long a fill waits for a reader that has
	// stopped reading (a client that keeps its connection but takes no
	// bytes) before it fills the rest of its run without waiting, to
	// disk, and lets the origin go: an origin need not keep a
	// connection nobody reads (nginx drops one after 60 s). Default 1
	// minute.
	MaxFillPause time.Duration
	// Sendfile sends whole blocks on disk to plain-HTTP clients with
	// sendfile(2), pinned in the page cache and checked in place
	// (zerocopy.go). False: they are copied through a buffer.
	Sendfile bool
}

// Defaults for the zero values of Config.
const (
	DefaultBlockSize       = 1 << 20
	DefaultPrefetchBlocks  = 8
	DefaultRAM             = 256 << 20
	DefaultRevalidateAfter = 5 * time.Minute
	DefaultMaxFills        = 32
	// maxRun bounds the blocks one origin read fills, so that a client
	// that leaves a 10 GiB read early costs at most this much more.
	maxRun = 64
)

func (c *Config) setDefaults() {
	if c.HighWatermark == 0 {
		c.HighWatermark = 0.95
	}
	if c.LowWatermark == 0 {
		c.LowWatermark = 0.90
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.PrefetchBlocks == 0 {
		c.PrefetchBlocks = DefaultPrefetchBlocks
	}
	if c.RAM == 0 {
		c.RAM = DefaultRAM
	}
	if c.RevalidateAfter == 0 {
		c.RevalidateAfter = DefaultRevalidateAfter
	}
	if c.MaxFills == 0 {
		c.MaxFills = DefaultMaxFills
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 10 * time.Second
	}
	if c.OriginIdleTimeout == 0 {
		c.OriginIdleTimeout = 5 * time.Second
	}
	if c.MaxFillPause == 0 {
		c.MaxFillPause = time.Minute
	}
}

// Options are what the process gives the cache besides its config.
type Options struct {
	Log *slog.Logger
	// Client is used to read from the other nodes of the group. Nil: a
	// client of its own.
	Client *http.Client
	// Membership, when set, is where the group's nodes find each other
	// (Redis): Config.Group is then ignored, and Config.Self is this
	// node's URL among them. Nil: the static Config.Group.
	Membership Membership
	// MayList reports whether the caller of r may list the path p (the
	// auth rules' list permission). /api/cache/files shows only the files
	// it allows, since the operator's pages pass the auth rules
	// unguarded. Nil: every file is shown.
	MayList func(r *http.Request, p string) bool
	// Trusted, when set, says whether the origin's answers may be relied
	// on for RevalidateAfter: false while the process could miss the
	// notice of a write (it shares the lake's state through Redis and
	// holds no membership lease yet, shared.Client.Trusted). Meanwhile
	// every read asks the origin again, and what it answers counts for
	// no time. Nil: always.
	Trusted func() bool
}

// Cache is a running cache. Its methods are safe for concurrent use.
type Cache struct {
	// distrusts counts the calls of Distrust: an origin's answer asked
	// before one counts for nothing after it (checkedNow).
	distrusts atomic.Uint64

	cfg    Config
	origin endpoint.Endpoint
	log    *slog.Logger
	m      *metrics
	ram    *ramCache
	group  *group // nil without a group

	mayList func(r *http.Request, p string) bool // Options.MayList
	trusted func() bool                          // Options.Trusted; nil: always

	ctx    context.Context // the cache's life: fills and checks run in it
	cancel context.CancelFunc
	wg     sync.WaitGroup
	fills  chan struct{} // a slot per origin read filling the disk
	bufs   sync.Pool     // *[]byte of BlockSize, aligned for direct I/O
	direct bool          // fills write whole blocks with direct I/O (directWrites)
	sf     singleflight.Group
	purgec chan struct{} // a purge is wanted
	epochs atomic.Uint64 // the last epoch given to a file version

	mu     sync.Mutex // guards files, and the totals
	files  map[string]*file
	bytes  int64
	inodes int64
	rnd    *rand.Rand
}

// New opens (or creates) the cache in cfg.Dir over origin, and keeps the
// blocks an earlier run left there. The cache runs until Close.
func New(ctx context.Context, cfg Config, origin endpoint.Endpoint, opts Options) (*Cache, error) {
	cfg.setDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("cache: no directory")
	}
	if cfg.BlockSize < 4<<10 || cfg.BlockSize > 64<<20 {
		return nil, fmt.Errorf("cache: block size %d: want 4 KiB to 64 MiB", cfg.BlockSize)
	}
	if cfg.LowWatermark >= cfg.HighWatermark || cfg.HighWatermark > 1 || cfg.LowWatermark <= 0 {
		return nil, fmt.Errorf("cache: watermarks %.2f/%.2f: want 0 < low < high <= 1", cfg.LowWatermark, cfg.HighWatermark)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if cfg.MaxBytes == 0 || cfg.MaxInodes == 0 {
		b, in, err := fsSize(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
		if cfg.MaxBytes == 0 {
			cfg.MaxBytes = b * 9 / 10
		}
		if cfg.MaxInodes == 0 {
			cfg.MaxInodes = in * 9 / 10
		}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Cache{
		cfg: cfg, origin: origin, log: opts.Log, mayList: opts.MayList, trusted: opts.Trusted, m: newMetrics(),
		ctx: cctx, cancel: cancel,
		fills:  make(chan struct{}, cfg.MaxFills),
		purgec: make(chan struct{}, 1),
		files:  map[string]*file{},
		rnd:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	c.bufs.New = func() any { b := alignedBuf(cfg.BlockSize); return &b }
	c.direct = directWrites(filepath.Join(cfg.Dir, "data"), cfg.BlockSize)
	if cfg.RAM > 0 {
		c.ram = newRAMCache(cfg.RAM)
	}
	if err := c.scan(); err != nil {
		cancel()
		return nil, err
	}
	switch {
	case opts.Membership != nil:
		g, err := newDynamicGroup(opts.Membership, cfg.Self, opts.Client, opts.Log)
		if err != nil {
			cancel()
			return nil, err
		}
		c.group = g
		c.wg.Go(func() { g.run(cctx) })
	case len(cfg.Group) > 0:
		g, err := newGroup(cfg.Group, cfg.Self, opts.Client, opts.Log)
		if err != nil {
			cancel()
			return nil, err
		}
		c.group = g
		c.wg.Go(func() { g.run(cctx) })
	}
	c.wg.Go(c.purger)
	c.m.setUsage(c.usage())
	return c, nil
}

// Close stops the fills and the purger and waits for them.
func (c *Cache) Close() error {
	c.cancel()
	c.wg.Wait()
	for _, f := range c.list() {
		f.mu.Lock()
		f.closeMetaLocked()
		f.mu.Unlock()
	}
	return nil
}

// scan loads the block maps an earlier run left, dropping those that
// cannot be read and the temp files of a crash.
func (c *Cache) scan() error {
	root := filepath.Join(c.cfg.Dir, "data")
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		switch {
		case strings.HasSuffix(p, ".meta"):
			f, err := load(c.cfg.Dir, p)
			if err != nil {
				c.log.Warn("cache: dropping an unreadable block map", "file", p, "err", err)
				_ = os.Remove(p)
				_ = os.Remove(strings.TrimSuffix(p, ".meta") + ".data")
				return nil
			}
			f.epoch = c.epochs.Add(1)
			c.files[f.path] = f
			c.bytes += f.bytes
			c.inodes += 2
		case strings.HasSuffix(p, ".tmp"):
			_ = os.Remove(p)
		case strings.HasSuffix(p, ".data"):
			if _, err := os.Stat(strings.TrimSuffix(p, ".data") + ".meta"); errors.Is(err, fs.ErrNotExist) {
				_ = os.Remove(p)
			}
		}
		return nil
	})
}

// get returns the file entry of p, made (unknown, nothing cached) when
// there is none.
func (c *Cache) get(p string) *file {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[p]
	if f == nil {
		f = newFile(c.cfg.Dir, p)
		c.files[p] = f
	}
	return f
}

// list returns the file entries. Lock order: a file's mu may be taken
// before c.mu, never after.
func (c *Cache) list() []*file {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs := make([]*file, 0, len(c.files))
	for _, f := range c.files {
		fs = append(fs, f)
	}
	return fs
}

// errChanged: the origin's file is not the version the blocks are of.
var errChanged = errors.New("cache: the origin file changed")

// revalidate makes sure f describes the origin's current version of its
// file: when it was never looked up, when the last look-up is older than
// RevalidateAfter, or when force (Cache-Control: no-cache). A changed
// file drops its blocks. Concurrent revalidations of a file are one.
// An origin that cannot answer leaves a version it confirmed in this
// run in place (the bytes cached are still checked ones); with none, it
// is the error.
func (c *Cache) revalidate(ctx context.Context, f *file, force bool) error {
	trusted := c.isTrusted() // never under f.mu: see isTrusted
	f.mu.Lock()
	fresh := f.known && !force && time.Since(f.checked) < c.cfg.RevalidateAfter && trusted
	f.mu.Unlock()
	if fresh {
		return nil
	}
	_, err, _ := c.sf.Do(f.path, func() (any, error) {
		c.m.revalidations.Inc()
		asked := c.distrusts.Load()
		in, err := c.origin.Stat(ctx, f.path)
		if err != nil {
			if endpoint.Class(err) == endpoint.ErrNotFound {
				c.drop(f)
			}
			return nil, err
		}
		if in.IsDir {
			return nil, errIsDir
		}
		if force && !in.Strong {
			// no-cache asks for the origin's current bytes, and equal
			// weak validators do not say the cached ones are those: only
			// the origin's adler32, equal to the one recorded, does.
			c.sumOf(ctx, f.path, &in)
			return nil, c.confirmProven(f, in, asked)
		}
		f.mu.Lock()
		epoch := f.epoch
		f.mu.Unlock()
		if err := c.confirm(f, in, asked); err != nil || in.Strong {
			return nil, err
		}
		f.mu.Lock()
		reset := f.epoch != epoch
		f.mu.Unlock()
		if reset {
			return nil, nil // a new version: none of it is cached to prove
		}
		// Weak validators that stayed the same say nothing of the bytes:
		// read one cached block again (a file replaced with its size and
		// time kept is dropped, and read afresh).
		if _, err := c.prove(ctx, f, epoch, 0); errors.Is(err, errChanged) {
			return nil, err
		}
		return nil, nil
	})
	// errChanged is an answer, not a silence: the caller reads again.
	if err != nil && !errors.Is(err, errIsDir) && !errors.Is(err, errChanged) && endpoint.Class(err) == endpoint.ErrUnavailable {
		// Only a version the origin confirmed in this run, while no write
		// could pass this cache by (checked is zero after a restart, while
		// the cache is not a member of the lake's shared state, and after
		// Distrust), may stand in for the origin's answer: one loaded from
		// disk may have been replaced by a write acknowledged while this
		// process was down or cut off.
		f.mu.Lock()
		known := f.known && !f.gone && !f.checked.IsZero()
		f.mu.Unlock()
		if known {
			c.m.staleServes.Inc()
			c.log.WarnContext(ctx, "cache: origin did not answer; serving the version last confirmed", "path", f.path, "err", err)
			return nil
		}
	}
	return err
}

var errIsDir = errors.New("cache: a directory")

// sumOf fills in's adler32, when it has none, from the origin's
// Checksummer; it stays empty when the origin cannot say.
func (c *Cache) sumOf(ctx context.Context, p string, in *endpoint.Info) {
	if in.Checksums[httpx.Adler32] != "" {
		return
	}
	if sum, err := endpoint.Checksum(ctx, c.origin, p, httpx.Adler32); err == nil {
		in.Checksums = map[string]string{httpx.Adler32: sum}
	}
}

// confirmProven is confirm for a revalidation that must prove the blocks
// are of the origin's current bytes (no-cache) when its validators are
// weak: they stay only when the origin's adler32 is the one recorded for
// them; otherwise they are dropped, and the file is read afresh.
func (c *Cache) confirmProven(f *file, in endpoint.Info, asked uint64) error {
	f.mu.Lock()
	sum := in.Checksums[httpx.Adler32]
	unproven := f.known && !f.gone && (sum == "" || sum != f.hdr.Adler32)
	f.mu.Unlock()
	if unproven {
		c.log.Info("cache: no-cache revalidation cannot prove the cached blocks are the origin's current bytes; dropping them",
			"path", f.path, "origin", describe(in))
		c.drop(f)
		return errChanged // the caller starts again with a new entry
	}
	return c.confirm(f, in, asked)
}

// confirm records in, the origin's answer asked when Distrust had been
// called asked times, as the origin's current version of f: the blocks
// stay when they are of it, and are dropped when not.
func (c *Cache) confirm(f *file, in endpoint.Info, asked uint64) error {
	hdr := header{Path: f.path, Size: in.Size, ETag: in.ETag, Strong: in.Strong, Block: c.cfg.BlockSize}
	if !in.ModTime.IsZero() {
		hdr.ModTime = in.ModTime.UnixNano()
	}
	hdr.Adler32 = in.Checksums[httpx.Adler32]
	trusted := c.isTrusted() // never under f.mu: see isTrusted
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return errChanged // dropped meanwhile: the caller starts again
	}
	if f.known && endpoint.SameVersion(f.hdr.version(), in) && f.hdr.Size == in.Size && f.hdr.Strong == in.Strong {
		if f.hdr.Adler32 == "" && hdr.Adler32 != "" {
			f.hdr.Adler32 = hdr.Adler32
		}
		f.checked = c.checkedNow(trusted, asked)
		return nil
	}
	if f.known {
		c.m.changed.Inc()
		c.log.Info("cache: origin file changed; dropping its blocks", "path", f.path,
			"was", describe(f.hdr.version()), "now", describe(in))
	}
	var inodes int64
	if !f.known {
		inodes = 2 // the data file and the block map are new
	}
	c.account(-f.bytes, inodes)
	c.dropPrefetchedLocked(f)
	if err := f.resetLocked(hdr, c.epochs.Add(1)); err != nil {
		return fmt.Errorf("cache: %s: %w: %w", f.path, err, endpoint.ErrUnavailable)
	}
	f.checked = c.checkedNow(trusted, asked)
	return nil
}

// isTrusted reports whether the origin's answers count for
// RevalidateAfter (Options.Trusted).
//
// It must be asked with no file's lock held: the lake's shared state
// answers it, and a lease found run out flushes the process there and
// then (shared.Client.Trusted), which distrusts every file under its
// lock. Asked under a file's lock, that file's next lock never came: a
// cache held every request of the path, forever, once its process had
// been stopped longer than its lease.
func (c *Cache) isTrusted() bool { return c.trusted == nil || c.trusted() }

// checkedNow is the time an origin's answer, asked when Distrust had
// been called asked times, counts from: now, or none (the next read asks
// again) while not trusted (isTrusted, asked before the file's lock was
// taken), and when Distrust was called since it was asked. An answer
// asked before the process was cut off from the lake and received after
// it joined again may predate a write it missed. Under the file's lock,
// a Distrust after trusted was asked is seen here (it counts before it
// takes the lock), or comes after and clears the mark.
func (c *Cache) checkedNow(trusted bool, asked uint64) time.Time {
	if !trusted || c.distrusts.Load() != asked {
		return time.Time{}
	}
	return time.Now()
}

func describe(in endpoint.Info) string {
	return fmt.Sprintf("%d bytes, etag %q, modified %s", in.Size, in.ETag, in.ModTime.UTC().Format(time.RFC3339))
}

// drop removes f from the index and its files from the disk. Readers in
// flight finish from the unlinked inode; a fill of it marks nothing.
func (c *Cache) drop(f *file) { c.remove(f, false) }

// remove is drop; with unpinnedOnly it leaves (and reports false) a file
// being read or filled, deciding under the file's lock so that no reader
// can pin it in between.
func (c *Cache) remove(f *file, unpinnedOnly bool) bool {
	f.mu.Lock()
	if f.gone || unpinnedOnly && (f.pins > 0 || len(f.filling) > 0) {
		f.mu.Unlock()
		return false
	}
	f.gone = true
	f.epoch = c.epochs.Add(1)
	c.dropPrefetchedLocked(f)
	bytes, known := f.bytes, f.known
	f.closeMetaLocked()
	_ = os.Remove(f.metaPath())
	_ = os.Remove(f.dataPath())
	f.present, f.bytes = 0, 0
	clear(f.have)
	if known {
		c.account(-bytes, -2) // under f.mu, as the fills' additions are
	}
	f.mu.Unlock()
	c.mu.Lock()
	if c.files[f.path] == f {
		delete(c.files, f.path)
	}
	c.mu.Unlock()
	return true
}

// dropPrefetchedLocked counts the blocks read ahead that no one read.
func (c *Cache) dropPrefetchedLocked(f *file) {
	var n int64
	for i := range f.prefetched {
		n += f.hdr.blockLen(i)
	}
	c.m.prefetchWasted.Add(float64(n))
	clear(f.prefetched)
}

// account adds to the bytes and inodes on disk, and asks for a purge when
// they pass the high watermark.
func (c *Cache) account(bytes, inodes int64) {
	c.mu.Lock()
	c.bytes += bytes
	c.inodes += inodes
	over := float64(c.bytes) > c.cfg.HighWatermark*float64(c.cfg.MaxBytes) ||
		float64(c.inodes) > c.cfg.HighWatermark*float64(c.cfg.MaxInodes)
	u := Usage{Bytes: c.bytes, Inodes: c.inodes, Files: int64(len(c.files)), MaxBytes: c.cfg.MaxBytes, MaxInodes: c.cfg.MaxInodes}
	c.mu.Unlock()
	c.m.setUsage(u)
	if over {
		select {
		case c.purgec <- struct{}{}:
		default:
		}
	}
}

// Usage is what the cache holds on disk.
type Usage struct {
	Bytes     int64 `json:"bytes"`
	Inodes    int64 `json:"inodes"`
	Files     int64 `json:"files"`
	MaxBytes  int64 `json:"max_bytes"`
	MaxInodes int64 `json:"max_inodes"`
}

func (c *Cache) usage() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Usage{Bytes: c.bytes, Inodes: c.inodes, Files: int64(len(c.files)), MaxBytes: c.cfg.MaxBytes, MaxInodes: c.cfg.MaxInodes}
}

// Files lists the access pattern of every cached file, most recently
// read first.
func (c *Cache) Files() []FilePattern {
	fs := c.list()
	out := make([]FilePattern, 0, len(fs))
	for _, f := range fs {
		f.mu.Lock()
		if f.known {
			out = append(out, f.pattern.summary(f.path, f.hdr.Size, f.bytes, f.verified))
		}
		f.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b FilePattern) int { return b.Last.Compare(a.Last) })
	return out
}

// randN is a uniform random number in [0, n), for the read-size sample.
func (c *Cache) randN(n int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rnd.Int64N(n)
}

// Distrust makes every file's next read ask the origin whether it
// changed (as after RevalidateAfter): the process may have missed
// writes (it was cut off from the lake's shared state). Blocks of a
// version the origin confirms stay.
func (c *Cache) Distrust() {
	c.distrusts.Add(1) // before the marks go: an answer in flight sees it
	for _, f := range c.list() {
		f.mu.Lock()
		f.checked = time.Time{}
		f.mu.Unlock()
	}
}

// Forget drops the cached blocks of p: the process changed the file (a
// write through the federator or the buffer in front of the cache), and
// a reader must not see the old version until the next revalidation.
func (c *Cache) Forget(p string) {
	if f := c.peek(p); f != nil {
		c.drop(f)
	}
}
