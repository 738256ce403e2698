// Command entrybytes measures what one metadata entry costs the
// federator: in its process (Go heap after a GC, divided by entries) and,
// with -redis, in the Redis its federators share (INFO memory
// used_memory, divided by entries). bench/shared.sh runs it.
//
//	entrybytes -n 1000000                               # process only
//	entrybytes -n 1000000 -redis redis://127.0.0.1:6379/0
//
// The federator is the real one (package federation), with three sites
// (-sites) and proximity ranking as in bench/federation.sh, filled by
// one GET of each path through its handler (a cold look-up, then the
// 302; the cache keeps the entry packed). With -reads 2 or more, each
// path is read again after the fill: the cache keeps some of the
// entries unpacked, with their header values, while they are read
// (up to 16,384 of them). Its endpoints are
// the real http kind against real storage roles in this process, except
// that Stat answers the Info a real Stat of one file returned, with the
// name and strings copied afresh as a parsed answer would have them: a
// million real HTTP stats per site would take minutes, and the entry
// keeps the same fields either way.
//
// The process is measured on a federator alone (a federator sharing
// state keeps the same entries). With -redis, a second federator shares
// state through that Redis and fills it by real look-ups (load, lease,
// store) of the first -real paths; the rest, up to -n, are copies of
// those entries under their own paths (see redisBytes).
//
// It prints one line of key=value pairs for the script to parse:
// entries, proc_bytes (per entry), fill_s, reads when not 1, and with
// -redis redis_bytes (per entry, over all), redis_bytes_real (over the
// real ones) and real.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/federation"
	"github.com/lakefed/lakefed/internal/shared"
	"github.com/lakefed/lakefed/internal/storage"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "entrybytes:", err)
		os.Exit(1)
	}
}

func run() error {
	var o opts
	flag.IntVar(&o.n, "n", 1000000, "entries")
	flag.StringVar(&o.pattern, "pattern", "/data/d%04d/f%07d", "path pattern, given (index/per, index); its paths must all have one length")
	flag.IntVar(&o.per, "per", 100, "files per directory")
	redisURL := flag.String("redis", "", "redis://HOST:PORT/DB: measure the entries in this Redis too")
	flag.IntVar(&o.real, "real", 50000, "with -redis: entries stored in Redis by real look-ups (the rest are copies of them)")
	flag.IntVar(&o.conns, "c", 32, "concurrent look-ups")
	nsites := flag.Int("sites", 3, "sites holding every file (1 to 3)")
	memProfile := flag.String("memprofile", "", "write a heap profile here after the fill (what an entry is made of)")
	flag.IntVar(&o.reads, "reads", 1, "GETs of each path in the process figure (the first a look-up, the others warm)")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *nsites < 1 || *nsites > 3 {
		return errors.New("-sites: 1 to 3")
	}
	sites, stop, err := startSites(ctx, *nsites, log)
	if err != nil {
		return err
	}
	defer stop()
	proc, fillTime, err := procBytes(ctx, o, sites, *memProfile, log)
	if err != nil {
		return err
	}
	out := fmt.Sprintf("entries=%d proc_bytes=%.0f fill_s=%.1f", o.n, proc, fillTime.Seconds())
	if o.reads > 1 {
		out += fmt.Sprintf(" reads=%d", o.reads)
	}
	if *redisURL != "" {
		real, all, err := redisBytes(ctx, o, sites, *redisURL, log)
		if err != nil {
			return err
		}
		out += fmt.Sprintf(" redis_bytes=%.0f redis_bytes_real=%.0f real=%d", all, real, min(o.real, o.n))
	}
	fmt.Println(out)
	return nil
}

type opts struct {
	n, per, real, conns, reads int
	pattern                    string
}

func (o opts) name(i int) string { return fmt.Sprintf(o.pattern, i/o.per, i) }

// warmup is a few hundred look-ups before the heap is first measured:
// they grow the pools (goroutine stacks, connections) that do not grow
// with entries. Their paths are past the measured ones.
const warmup = 500

// procBytes fills a federator alone with o.n entries, reads them
// o.reads-1 times more, and returns its heap growth per entry and how
// long the fill took.
func procBytes(ctx context.Context, o opts, sites []*site, memProfile string, log *slog.Logger) (float64, time.Duration, error) {
	fed, _, stopFed, err := newFederator(ctx, sites, o.n+warmup, "", log)
	if err != nil {
		return 0, 0, err
	}
	defer stopFed()
	h := fed.Handler()
	if err := fill(h, o, o.n, o.n+warmup); err != nil {
		return 0, 0, err
	}
	before := heap()
	start := time.Now()
	if err := fill(h, o, 0, o.n); err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	for range o.reads - 1 {
		if err := fill(h, o, 0, o.n); err != nil {
			return 0, 0, err
		}
	}
	after := heap()
	if memProfile != "" {
		if err := writeHeapProfile(memProfile); err != nil {
			return 0, 0, err
		}
	}
	runtime.KeepAlive(fed) // what was measured is its cache
	return float64(after-before) / float64(o.n), took, nil
}

// redisBytes measures what the entries take in Redis, as used_memory
// grows. The first o.real are stored by real look-ups of a federator
// sharing state through it (load, lease, store): real is their growth
// per entry. The others, up to o.n, are copies of those under the other
// paths (the path replaced in each, so of the same length, for the
// time the original has left), since a million look-ups through Redis
// take minutes here: all is the growth per entry over the o.n.
func redisBytes(ctx context.Context, o opts, sites []*site, redisURL string, log *slog.Logger) (real, all float64, err error) {
	fed, rdb, stopFed, err := newFederator(ctx, sites, o.n+warmup, redisURL, log)
	if err != nil {
		return 0, 0, err
	}
	defer stopFed()
	h := fed.Handler()
	k := min(o.real, o.n)
	if err := fill(h, o, o.n, o.n+warmup); err != nil {
		return 0, 0, err
	}
	if err := leasesGone(ctx, rdb); err != nil {
		return 0, 0, err
	}
	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	if err := fill(h, o, 0, k); err != nil {
		return 0, 0, err
	}
	if err := leasesGone(ctx, rdb); err != nil {
		return 0, 0, err
	}
	mid, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	if err := copyEntries(ctx, rdb, o, k); err != nil {
		return 0, 0, err
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return 0, 0, err
	}
	return float64(mid-before) / float64(k), float64(after-before) / float64(o.n), nil
}

// copyEntries stores, for every path from k to o.n, the entry of path
// i%k with the path replaced, for the time the original has left.
func copyEntries(ctx context.Context, rdb *redis.Client, o opts, k int) error {
	const batch = 1000
	for from := k; from < o.n; from += batch {
		to := min(from+batch, o.n)
		pipe := rdb.Pipeline()
		vals := make([]*redis.StringCmd, 0, to-from)
		ttls := make([]*redis.DurationCmd, 0, to-from)
		for i := from; i < to; i++ {
			src := shared.Key("md", o.name(i%k))
			vals = append(vals, pipe.Get(ctx, src))
			ttls = append(ttls, pipe.PTTL(ctx, src))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("reading the entries to copy: %w", err)
		}
		pipe = rdb.Pipeline()
		for j, i := 0, from; i < to; i, j = i+1, j+1 {
			src, dst := o.name(i%k), o.name(i)
			if len(src) != len(dst) {
				return fmt.Errorf("paths %q and %q differ in length: give a -pattern of fixed width", src, dst)
			}
			pipe.Set(ctx, shared.Key("md", dst), strings.ReplaceAll(vals[j].Val(), src, dst), ttls[j].Val())
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("copying entries: %w", err)
		}
	}
	return nil
}

// heap returns the live heap after a full collection.
func heap() uint64 {
	var ms runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// site is one storage role and the http-kind endpoint that reaches it.
type site struct {
	name string
	url  string
	ep   endpoint.Endpoint
	info endpoint.Info // what a real Stat of a file answered
}

// startSites serves n (up to three) storage roles on 127.0.0.1, each
// with one file, and stats that file through the http kind.
func startSites(ctx context.Context, n int, log *slog.Logger) ([]*site, func(), error) {
	dir, err := os.MkdirTemp("", "entrybytes")
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	sctx, cancel := context.WithCancel(ctx)
	stop := func() { cancel(); wg.Wait(); os.RemoveAll(dir) }
	var sites []*site
	for _, name := range []string{"site-a", "site-b", "site-c"}[:n] {
		root := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
			stop()
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(root, "data", "f"), []byte("one file of the bench\n"), 0o644); err != nil {
			stop()
			return nil, nil, err
		}
		srv, err := storage.New(storage.Config{Root: root}, log)
		if err != nil {
			stop()
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		wg.Go(func() { _ = srv.Serve(sctx, ln); srv.Close() })
		s := &site{name: name, url: srv.URL(ln.Addr())}
		if s.ep, err = kinds.New(ctx, endpoint.Config{Name: name, URL: s.url}, log); err != nil {
			stop()
			return nil, nil, err
		}
		if s.info, err = s.ep.Stat(ctx, "/data/f"); err != nil {
			stop()
			return nil, nil, fmt.Errorf("stat through the http kind: %w", err)
		}
		sites = append(sites, s)
	}
	return sites, stop, nil
}

// statAsTemplate is a site's endpoint whose Stat answers the site's
// Info for every path, as freshly allocated as a parsed answer.
type statAsTemplate struct {
	endpoint.Endpoint
	info endpoint.Info
}

func (e statAsTemplate) Stat(_ context.Context, p string) (endpoint.Info, error) {
	in := e.info
	in.Name = path.Base(p)
	in.ETag = strings.Clone(in.ETag)
	in.Owner, in.Group = strings.Clone(in.Owner), strings.Clone(in.Group)
	if in.Checksums != nil {
		in.Checksums = maps.Clone(in.Checksums)
	}
	return in, nil
}

func (e statAsTemplate) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	return endpoint.RedirectURL(ctx, e.Endpoint, p, op)
}

// newFederator makes the federator over sites, sharing state through
// redisURL unless it is "", and returns the Redis client it shares
// through (nil when alone) and a function that stops it all.
func newFederator(ctx context.Context, sites []*site, n int, redisURL string, log *slog.Logger) (*federation.Federator, *redis.Client, func(), error) {
	locs := []string{"[46.23, 6.05]", "[41.85, -88.27]", "[51.5, -0.1]"}
	var b strings.Builder
	fmt.Fprintf(&b, `federation:
  mode: redirect
  client_networks:
    - networks: [127.0.0.0/8]
      location: [46.23, 6.05]
  metadata_cache: {max_entries: %d, ttl: 1h, negative_ttl: 5s}
  health: {interval: 2s, timeout: 1s}
  endpoints:
`, 2*n)
	byName := map[string]*site{}
	for i, s := range sites {
		fmt.Fprintf(&b, "    - {name: %s, url: %q, location: %s, timeout: 5s}\n", s.name, s.url, locs[i])
		byName[s.name] = s
	}
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		return nil, nil, nil, err
	}
	newEP := func(ctx context.Context, ec config.Endpoint, log *slog.Logger) (endpoint.Endpoint, error) {
		s := byName[ec.Name]
		return statAsTemplate{Endpoint: s.ep, info: s.info}, nil
	}
	var fed *federation.Federator
	var sh *shared.Client
	if redisURL != "" {
		sh, err = shared.New(ctx, shared.Options{URL: redisURL, Log: log,
			OnInvalidate: func(paths []string) { fed.ForgetShared(paths) }, OnFlush: func() { fed.ForgetAll() }})
		if err != nil {
			return nil, nil, nil, err
		}
	}
	fed, err = federation.New(ctx, *cfg.Federation, federation.Options{Log: log, NewEndpoint: newEP, Shared: sh})
	if err != nil {
		return nil, nil, nil, err
	}
	if sh == nil {
		return fed, nil, func() { fed.Close() }, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sh.Run(rctx) })
	stop := func() { fed.Close(); cancel(); wg.Wait(); sh.Close() }
	for deadline := time.Now().Add(10 * time.Second); sh.Degraded() || !sh.Trusted(); {
		if time.Now().After(deadline) {
			stop()
			return nil, nil, nil, fmt.Errorf("never joined the shared state at %s", redisURL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fed, sh.Redis(), stop, nil
}

// usedMemory is Redis's INFO memory used_memory (0 without Redis).
func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	if rdb == nil {
		return 0, nil
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("redis INFO memory has no used_memory")
}

// leasesGone waits until the look-up leases of the fill (seconds long)
// have run out and left Redis: they are not what an entry keeps. A
// SCAN over them removes those that ran out, as any access does.
func leasesGone(ctx context.Context, rdb *redis.Client) error {
	if rdb == nil {
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var cursor uint64
		left := 0
		for {
			keys, next, err := rdb.Scan(ctx, cursor, shared.Key("lease", "lookup:*"), 10000).Result()
			if err != nil {
				return err
			}
			left += len(keys)
			if cursor = next; cursor == 0 {
				break
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d look-up leases still in redis after a minute", left)
		}
		time.Sleep(time.Second)
	}
}

// fill GETs the paths of indexes [from, to) through h, o.conns at a
// time, and wants a 302 for each.
func fill(h http.Handler, o opts, from, to int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var bad atomic.Int64
	var wg sync.WaitGroup
	for range o.conns {
		wg.Go(func() {
			w := &discard{h: http.Header{}}
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				r, _ := http.NewRequest(http.MethodGet, "http://fed"+o.name(i), nil)
				r.RemoteAddr = "127.0.0.1:40000"
				clear(w.h)
				h.ServeHTTP(w, r)
				if w.code != http.StatusFound {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if b := bad.Load(); b > 0 {
		return fmt.Errorf("%d of %d GETs were not answered 302", b, to-from)
	}
	return nil
}

// discard is a ResponseWriter that keeps nothing.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
