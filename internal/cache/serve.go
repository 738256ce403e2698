package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/davxml"
)

// Handler serves the cache on a listener of its own: the files (GET and
// HEAD of the origin's paths, with Range and multi-range), the cache's
// API under /api/cache/ and its metrics at /metrics.
func (c *Cache) Handler() http.Handler {
	api := c.APIHandler()
	files := c.FileHandler()
	metrics := c.MetricsHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/metrics":
			metrics.ServeHTTP(w, r)
		case p == "/api/cache" || strings.HasPrefix(p, "/api/cache/"):
			api.ServeHTTP(w, r)
		default:
			files.ServeHTTP(w, r)
		}
	})
}

// APIHandler serves /api/cache (usage and group), /api/cache/files (the
// access pattern of every file) and /api/cache/health.
func (c *Cache) APIHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/cache/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /api/cache/files", func(w http.ResponseWriter, r *http.Request) {
		one := r.URL.Query().Get("path")
		files := slices.DeleteFunc(c.Files(), func(f FilePattern) bool {
			return one != "" && f.Path != one || c.mayList != nil && !c.mayList(r, f.Path)
		})
		writeJSON(w, files)
	})
	mux.HandleFunc("GET /api/cache", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, c.Status())
	})
	return mux
}

// Status is what /api/cache shows.
type Status struct {
	Origin    string        `json:"origin"`
	Usage     Usage         `json:"usage"`
	BlockSize int64         `json:"block_size_bytes"`
	Group     []GroupMember `json:"group,omitempty"`
}

// Status reports the cache's usage and group.
func (c *Cache) Status() Status {
	st := Status{Origin: c.origin.Name(), Usage: c.usage(), BlockSize: c.cfg.BlockSize}
	if c.group != nil {
		st.Group = c.group.status()
	}
	return st
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// FileHandler serves GET and HEAD of the origin's paths through the
// cache; other methods get 405.
func (c *Cache) FileHandler() http.Handler { return http.HandlerFunc(c.serveFile) }

const allow = "OPTIONS, GET, HEAD, PROPFIND"

// servePropfind answers PROPFIND Depth 0 and 1 from the origin, so that
// clients that list or stat with WebDAV (lakefed ls, rclone, gfal-ls)
// work against the cache as against the origin. Listings are not
// cached: they are small, and a cached one would be stale.
func (c *Cache) servePropfind(w http.ResponseWriter, r *http.Request, p string) {
	depth := r.Header.Get("Depth")
	if depth != "0" && depth != "1" {
		davxml.WriteFiniteDepth(w)
		return
	}
	self, err := c.origin.Stat(r.Context(), p)
	if err != nil {
		c.writeErr(w, r, p, err)
		return
	}
	var b strings.Builder
	b.WriteString(davxml.MultistatusOpen)
	davxml.AppendResponse(&b, p, self)
	if depth == "1" && self.IsDir {
		items, err := c.origin.List(r.Context(), p)
		if err != nil {
			c.writeErr(w, r, p, err)
			return
		}
		for _, it := range items {
			davxml.AppendResponse(&b, davxml.JoinName(p, it.Name), it)
		}
	}
	davxml.WriteMultistatus(w, &b)
}

func (c *Cache) serveFile(w http.ResponseWriter, r *http.Request) {
	p, err := httpx.CleanPath(r.URL.Path)
	if err != nil {
		httpx.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case "PROPFIND":
		c.servePropfind(w, r, p)
		return
	case http.MethodOptions:
		w.Header().Set("Allow", allow)
		w.WriteHeader(http.StatusOK)
		return
	default:
		w.Header().Set("Allow", allow)
		httpx.WriteError(w, http.StatusMethodNotAllowed, "lakefed cache: method "+r.Method+" not allowed: the cache serves reads")
		return
	}
	hop := r.Header.Get(HopHeader) != ""
	if c.group != nil && !hop && c.viaOwner(w, r, p) {
		return
	}
	noCache, onlyIfCached := cacheControl(r.Header)
	for attempt := 0; attempt < 3; attempt++ {
		if onlyIfCached {
			// RFC 9111 §5.2.1.7: answer from what is stored, without
			// asking the origin anything.
			f := c.peek(p)
			if f == nil {
				httpx.WriteError(w, http.StatusGatewayTimeout, "lakefed cache: "+p+" is not cached (only-if-cached)")
				return
			}
			f.mu.Lock()
			known := f.known
			f.mu.Unlock()
			if !known {
				httpx.WriteError(w, http.StatusGatewayTimeout, "lakefed cache: "+p+" is not cached (only-if-cached)")
				return
			}
		}
		f := c.get(p)
		var err error
		if !onlyIfCached {
			err = c.revalidate(r.Context(), f, noCache && attempt == 0)
		}
		if err != nil {
			if errors.Is(err, errChanged) {
				continue
			}
			f.mu.Lock()
			known := f.known
			f.mu.Unlock()
			if !known {
				c.drop(f) // nothing on disk: keep no entry for a path that failed
			}
			c.writeErr(w, r, p, err)
			return
		}
		f.mu.Lock()
		if f.gone {
			f.mu.Unlock()
			continue
		}
		f.pins++
		f.lastUse = time.Now()
		hdr, epoch := f.hdr, f.epoch
		d, derr := os.Open(f.dataPath())
		f.mu.Unlock()
		if hop {
			w.Header().Set(VersionHeader, strength(hdr))
		}
		if derr != nil {
			c.unpin(f)
			c.drop(f)
			continue
		}
		err = c.answerPinned(w, r, f, d, hdr, epoch, onlyIfCached)
		if !errors.Is(err, errChanged) {
			return
		}
	}
	httpx.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("lakefed cache: %s: the origin file keeps changing", p))
}

// answerPinned is answer for a file serveFile pinned and opened: the pin
// and the data file are released however the answer ends, a panic that
// aborts it mid-body (http.ErrAbortHandler) included, or the file could
// never be purged.
func (c *Cache) answerPinned(w http.ResponseWriter, r *http.Request, f *file, d *os.File, hdr header, epoch uint64, onlyIfCached bool) error {
	defer c.unpin(f)
	defer d.Close()
	return c.answer(w, r, f, d, hdr, epoch, onlyIfCached)
}

func (c *Cache) unpin(f *file) {
	f.mu.Lock()
	f.pins--
	f.lastUse = time.Now()
	f.mu.Unlock()
}

// cacheControl reads the request directives the cache obeys (RFC 9111
// §5.2.1): no-cache (ask the origin whether the file changed first) and
// only-if-cached (504 unless every byte asked for is on disk).
func cacheControl(h http.Header) (noCache, onlyIfCached bool) {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-cache":
				noCache = true
			case "only-if-cached":
				onlyIfCached = true
			}
		}
	}
	if h.Get("Pragma") == "no-cache" && len(h.Values("Cache-Control")) == 0 {
		noCache = true // RFC 9111 §5.4
	}
	return noCache, onlyIfCached
}

// writeErr answers a failure before any byte was sent, with the
// federation's rule: 404 only when the origin said the file is not there,
// 503 with Retry-After when it could not say.
func (c *Cache) writeErr(w http.ResponseWriter, r *http.Request, p string, err error) {
	switch {
	case errors.Is(err, errIsDir):
		httpx.WriteError(w, http.StatusForbidden, fmt.Sprintf("lakefed cache: %s is a directory: the cache serves files", p))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// the client went away
	default:
		code := endpoint.HTTPStatus(err)
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", strconv.Itoa(int(c.cfg.RetryAfter.Seconds())))
		}
		httpx.WriteError(w, code, fmt.Sprintf("lakefed cache: %s: %v", p, err))
	}
}

// entityTag is the ETag the cache sends for a version: the origin's, so
// that conditionals mean the same at the cache and at the origin, else
// one made of the size and the modification time.
func entityTag(hdr header) string {
	if hdr.ETag != "" {
		return `"` + hdr.ETag + `"`
	}
	return fmt.Sprintf(`"%x-%x"`, hdr.Size, hdr.ModTime)
}

// answer serves one request from f's epoch. It returns errChanged, having
// written nothing, when the file changed before the first byte; after it,
// a failure aborts the response (the client must see a broken transfer,
// never a short body that looks whole).
func (c *Cache) answer(w http.ResponseWriter, r *http.Request, f *file, d *os.File, hdr header, epoch uint64, onlyIfCached bool) error {
	src := &source{c: c, f: f, hdr: hdr, epoch: epoch, onlyIfCached: onlyIfCached,
		rd: &rangeReader{c: c, f: f, d: d, hdr: hdr, epoch: epoch, ctx: r.Context(), zc: c.cfg.Sendfile && sendfileTo(r)}}
	defer src.rd.close()
	err := httpx.ServeContent(w, r, hdr.Size, src)
	switch {
	case err == nil:
	case errors.Is(err, errChanged):
		return errChanged
	case errors.Is(err, errNotCached):
		httpx.WriteError(w, http.StatusGatewayTimeout, "lakefed cache: not all of the bytes asked for are cached (only-if-cached)")
	default:
		c.writeErr(w, r, f.path, err)
	}
	return nil
}

// errNotCached: only-if-cached, and some of the bytes asked for are not
// on disk.
var errNotCached = errors.New("cache: not cached")

// source is one epoch of a cached file as httpx.ServeContent reads it.
type source struct {
	c            *Cache
	f            *file
	hdr          header
	epoch        uint64
	onlyIfCached bool
	rd           *rangeReader
}

// Describe gives the origin's validators for the version cached, weak
// when the origin's are.
func (s *source) Describe([]httpx.Range) (httpx.Content, error) {
	ct := httpx.Content{ETag: entityTag(s.hdr), Weak: !s.hdr.Strong}
	if s.hdr.ModTime != 0 {
		ct.ModTime = time.Unix(0, s.hdr.ModTime)
	}
	return ct, nil
}

// Digests is the origin's adler32, when it gave one.
func (s *source) Digests([]string) (map[string]string, error) {
	if s.hdr.Adler32 == "" {
		return nil, nil
	}
	return map[string]string{httpx.Adler32: s.hdr.Adler32}, nil
}

// Prepare refuses what only-if-cached cannot answer from disk, and makes
// the first block ready: the status waits for it, because a fill
// confirms (Versioned) that the origin still has the version described
// before a 200 promises its length.
func (s *source) Prepare(send []httpx.Range, head bool) error {
	if s.onlyIfCached && !s.c.allCached(s.f, s.epoch, send) {
		return errNotCached
	}
	if head {
		return nil
	}
	if !s.hdr.Strong {
		if i, ok := s.c.firstMissing(s.f, s.epoch, send); ok {
			// Blocks will be fetched to go with blocks on disk, and the
			// origin's validators cannot say whether its file is still
			// the one they came from: read one again before promising
			// a status (a file replaced is served whole, new, on the
			// next try, never spliced). The fills prove their own reads
			// too.
			if _, err := s.c.prove(s.rd.ctx, s.f, s.epoch, i); err != nil {
				return err
			}
		}
	}
	s.rd.seq = s.c.record(s.f, send)
	return s.rd.prepare(send[0])
}

// WriteRange copies rg from the blocks, fetching those missing.
func (s *source) WriteRange(w io.Writer, rg httpx.Range) error { return s.rd.copy(w, rg) }

// record adds a request's ranges to the file's access pattern and
// reports whether the reader reads sequentially (it starts where its
// last read ended), which earns it a prefetch.
func (c *Cache) record(f *file, ranges []httpx.Range) bool {
	starts := make([]int64, len(ranges))
	lengths := make([]int64, len(ranges))
	for i, rg := range ranges {
		starts[i], lengths[i] = rg.Start, rg.Length
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := f.pattern.reads > 0 && ranges[0].Start == f.pattern.lastEnd && ranges[0].Start > 0
	f.pattern.add(time.Now(), starts, lengths, c.randN)
	return seq
}

// allCached reports whether every block of ranges is on disk.
func (c *Cache) allCached(f *file, epoch uint64, ranges []httpx.Range) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch != epoch {
		return false
	}
	for _, rg := range ranges {
		if rg.Length == 0 {
			continue
		}
		for i := rg.Start / f.hdr.Block; i <= (rg.Start+rg.Length-1)/f.hdr.Block; i++ {
			if !f.have[i] {
				return false
			}
		}
	}
	return true
}

// firstMissing returns the first block of ranges not on disk, and false
// when every one is (or the epoch is gone).
func (c *Cache) firstMissing(f *file, epoch uint64, ranges []httpx.Range) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch != epoch || f.present == 0 {
		return 0, false
	}
	for _, rg := range ranges {
		if rg.Length == 0 {
			continue
		}
		for i := rg.Start / f.hdr.Block; i <= (rg.Start+rg.Length-1)/f.hdr.Block; i++ {
			if !f.have[i] {
				return i, true
			}
		}
	}
	return 0, false
}

// rangeReader copies ranges of one epoch of a file to a client: blocks
// from RAM or disk, checked, and fetched first when missing; or, under
// back pressure, the rest of a range straight from the origin.
type rangeReader struct {
	c     *Cache
	f     *file
	d     *os.File
	hdr   header
	epoch uint64
	ctx   context.Context
	seq   bool
	bp    *[]byte
	// zc says the answer may go out with sendfile (zerocopy.go); m is
	// the data file mapped for it, noMap that it could not be.
	zc    bool
	m     *mapping
	noMap bool
	// pending is the block being read ahead of a stream, spare the
	// buffer the next one is read into (readahead.go).
	pending *readAhead
	spare   *[]byte
	// held are blocks as fills handed them to this reader, until
	// copied; claims are blocks being fetched that it claimed, until it
	// collects them (or closes).
	held   map[int64]*blockBuf
	claims map[int64]*slot
	// done is closed when the reader closes: the runs it started stop
	// being paced to its claims (fill.go, maxClaims).
	done chan struct{}
	// origin is the uncached stream of a bypassed range, and its offset;
	// streamed says the answer used one already.
	origin    io.ReadCloser
	originOff int64
	streamed  bool
}

func (rd *rangeReader) close() {
	if rd.done != nil {
		close(rd.done)
	}
	rd.stopReadAhead()
	if rd.bp != nil {
		rd.c.bufs.Put(rd.bp)
	}
	for _, s := range rd.claims {
		rd.c.unclaim(rd.f, s)
	}
	for _, bb := range rd.held {
		rd.c.release(bb)
	}
	if rd.origin != nil {
		rd.origin.Close()
	}
	if rd.m != nil {
		rd.m.close()
	}
}

// ahead is the last block to fetch for a read ending with block last.
func (rd *rangeReader) ahead(last int64) int64 {
	if rd.seq && rd.c.cfg.PrefetchBlocks > 0 {
		return last + int64(rd.c.cfg.PrefetchBlocks)
	}
	return last
}

// prepare makes the first block of rg ready (on disk, or an origin stream
// open at its start), so that the status can be sent.
func (rd *rangeReader) prepare(rg httpx.Range) error {
	if rg.Length == 0 {
		return nil
	}
	bs := rd.hdr.Block
	i := rg.Start / bs
	_, err := rd.await(i, (rg.Start+rg.Length-1)/bs)
	if errors.Is(err, errBypass) {
		return rd.openOrigin(rg.Start, rg.Start+rg.Length)
	}
	return err
}

// await makes block i ready; waited says it was not on disk when asked
// for, or was claimed while being fetched. The bytes a fill handed over
// are kept in rd.held.
func (rd *rangeReader) await(i, last int64) (waited bool, err error) {
	if rd.held[i] != nil {
		return true, nil
	}
	if rd.claims == nil {
		rd.held, rd.claims, rd.done = map[int64]*blockBuf{}, map[int64]*slot{}, make(chan struct{})
	}
	if s := rd.claims[i]; s != nil {
		delete(rd.claims, i)
		// The window moves on: the reader claims the blocks after this
		// one before the fill has them.
		rd.f.mu.Lock()
		if rd.f.epoch == rd.epoch {
			claimLocked(rd.f, i, rd.ahead(last), rd.claims)
		}
		rd.f.mu.Unlock()
		bb, err := rd.c.collect(rd.ctx, rd.f, s)
		if err != nil {
			return true, err
		}
		if bb != nil {
			rd.held[i] = bb
			return true, nil
		}
		// Not filled by that fetch: on disk, or to fetch again.
	}
	f := rd.f
	f.mu.Lock()
	have := f.epoch == rd.epoch && f.have[i]
	f.mu.Unlock()
	if have {
		return false, nil
	}
	bb, err := rd.c.await(rd.ctx, f, rd.epoch, i, rd.ahead(last), rd.claims, rd.done)
	if bb != nil {
		rd.held[i] = bb
	}
	return true, err
}

func (rd *rangeReader) openOrigin(off, end int64) error {
	if rd.origin != nil && rd.originOff == off {
		return nil
	}
	if rd.origin != nil {
		rd.origin.Close()
		rd.origin = nil
	}
	rc, proven, err := rd.c.openOrigin(rd.ctx, rd.f.path, rd.hdr, off, end-off)
	if err != nil {
		if errors.Is(err, errChanged) {
			rd.c.changed(rd.f, rd.epoch)
		}
		return err
	}
	if !proven {
		// Its bytes join, in one answer, blocks on disk or an earlier
		// stream: prove it of their version first.
		compared, err := rd.c.prove(rd.ctx, rd.f, rd.epoch, off/rd.hdr.Block)
		if err == nil && !compared && rd.streamed {
			err = fmt.Errorf("cache: %s: a second origin read in one answer, and no block on disk to prove it of the first one's version: %w", rd.f.path, endpoint.ErrUnavailable)
		}
		if err != nil {
			rc.Close()
			return err
		}
	}
	rd.origin, rd.originOff, rd.streamed = rc, off, true
	return nil
}

// maxCorrupt bounds how often one request finds the same block corrupt
// before it gives up (a disk returning garbage for every read of it).
const maxCorrupt = 3

// copy writes rg to w.
func (rd *rangeReader) copy(w io.Writer, rg httpx.Range) error {
	c, f, hdr := rd.c, rd.f, rd.hdr
	bs := hdr.Block
	off, end := rg.Start, rg.Start+rg.Length
	last := (end - 1) / bs
	corrupt, corruptBlock := 0, int64(-1)
	for off < end {
		if rd.origin != nil {
			return rd.bypass(w, off, end)
		}
		i := off / bs
		waited, err := rd.await(i, last)
		if errors.Is(err, errBypass) {
			return rd.bypass(w, off, end)
		}
		if err != nil {
			return err
		}
		lo := off - i*bs
		hi, err := rd.writeBlock(w, i, last, lo, end-i*bs, lo == 0 && end >= (i+1)*bs)
		if bb := rd.held[i]; bb != nil {
			delete(rd.held, i)
			rd.c.release(bb)
		}
		if errors.Is(err, errCorrupt) {
			// Bounded per block, not per request: a file with many
			// rotted blocks heals in one read, and a disk that returns
			// garbage for one block again and again ends the read.
			if i != corruptBlock {
				corruptBlock, corrupt = i, 0
			}
			if corrupt++; corrupt > maxCorrupt {
				return err
			}
			continue // fetched again by the next await
		}
		if err != nil {
			return err
		}
		n := float64(hi - lo)
		if waited {
			c.m.missBytes.Add(n)
		} else {
			c.m.hitBytes.Add(n)
		}
		f.mu.Lock()
		if f.epoch == rd.epoch && f.prefetched[i] {
			delete(f.prefetched, i)
			c.m.prefetchUsed.Add(float64(hdr.blockLen(i)))
		}
		f.mu.Unlock()
		off = i*bs + hi
	}
	return nil
}

var errCorrupt = errors.New("cache: block corrupt on disk")

// writeBlock writes bytes [lo, hi) of block i (hi cut to the block's
// end) to w, sent from the page cache (sendBlock) or copied (block), and
// returns where it ended. A stream (whole blocks, up to block last)
// reads the next block ahead while it writes this one.
func (rd *rangeReader) writeBlock(w io.Writer, i, last, lo, hi int64, whole bool) (int64, error) {
	if rd.zeroCopy(w, i, whole) {
		end := min(hi, rd.hdr.blockLen(i))
		if end <= lo {
			return 0, rd.short(i, rd.hdr.blockLen(i), lo)
		}
		err := rd.sendBlock(w, i, lo, end)
		if !errors.Is(err, errNoZeroCopy) {
			return end, err
		}
	}
	b, err := rd.block(i, whole)
	if err != nil {
		return 0, err
	}
	if whole && i < last {
		rd.startReadAhead(i + 1)
	}
	hi = min(hi, int64(len(b)))
	if hi <= lo {
		return 0, rd.short(i, int64(len(b)), lo)
	}
	_, err = w.Write(b[lo:hi])
	return hi, err
}

// short is the error of a block shorter than its version says: never
// loop on it.
func (rd *rangeReader) short(i, n, lo int64) error {
	return fmt.Errorf("cache: %s: block %d has %d bytes, want more than %d", rd.f.path, i, n, lo)
}

// recorded returns the CRC-32C recorded for block i of the epoch:
// errChanged when the epoch is gone, errCorrupt when the block was
// forgotten meanwhile (await fetches it again).
func (rd *rangeReader) recorded(i int64) (uint32, error) {
	f := rd.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epoch != rd.epoch || f.gone {
		return 0, errChanged
	}
	if !f.have[i] {
		return 0, errCorrupt
	}
	return f.crcs[i], nil
}

// block returns block i of the epoch, checked: as the fill handed it
// over, or from RAM, else read from disk and its CRC-32C compared with
// the one recorded when it was filled. A mismatch forgets the block and
// returns errCorrupt. whole says the reader takes the whole block (a
// stream): such blocks are not kept in RAM, which is for the small
// reads that come back.
func (rd *rangeReader) block(i int64, whole bool) ([]byte, error) {
	c, f := rd.c, rd.f
	if bb := rd.held[i]; bb != nil {
		f.mu.Lock()
		same := f.epoch == rd.epoch && !f.gone
		f.mu.Unlock()
		if !same {
			return nil, errChanged
		}
		c.m.handedBytes.Add(float64(len(bb.b)))
		if c.ram != nil && !whole {
			c.ram.put(f.key, rd.epoch, i, bb.b)
		}
		return bb.b, nil
	}
	if c.ram != nil {
		if b := c.ram.get(f.key, rd.epoch, i); b != nil {
			return b, nil
		}
	}
	crc, err := rd.recorded(i)
	if err != nil {
		return nil, err
	}
	b, ok, err := rd.readChecked(i, crc)
	if err != nil {
		return nil, err
	}
	if !ok {
		c.corrupt(f, rd.epoch, i)
		return nil, errCorrupt
	}
	if c.ram != nil && !whole {
		c.ram.put(f.key, rd.epoch, i, b)
	}
	return b, nil
}

// bypass streams [off, end) of the file from the origin, uncached: the
// disk could not take more fills. The origin's reader must say it is of
// the same version.
func (rd *rangeReader) bypass(w io.Writer, off, end int64) error {
	if err := rd.openOrigin(off, end); err != nil {
		return err
	}
	n, err := io.CopyN(w, rd.origin, end-off)
	rd.c.m.bypassBytes.Add(float64(n))
	rd.origin.Close()
	rd.origin = nil
	return err
}
