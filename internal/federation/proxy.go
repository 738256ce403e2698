package federation

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// errStale says that the metadata a proxied read was planned from is out
// of date: a replica answered with another version of the file (another
// size, ETag or modification time) or no longer has it. Nothing has been
// sent; the caller looks the path up afresh and tries once more.
var errStale = errors.New("federation: replica changed since it was looked up")

// errIdle is the cause given to a replica read cancelled because the
// replica sent nothing for proxy_idle_timeout.
var errIdle = errors.New("no bytes within the proxy idle timeout")

// proxy streams the file through the federator. What a client can rely
// on (docs/guarantees.md):
//
//   - No status and no length is sent before a replica has opened the
//     bytes and confirmed (endpoint.Versioned) that it still holds the
//     version the metadata describes. A replica that changed, or lost the
//     file, makes proxy return errStale before anything is written, and
//     the caller looks the path up again: a cached size never truncates
//     or pads a newer file, and a file deleted everywhere is a 404, not a
//     200 with no body. When every replica fails to open, the answer is
//     503 with Retry-After.
//   - ETag, Last-Modified and Digest are those of the replica served, and
//     the conditionals (RFC 9110 §13) are evaluated against it.
//   - Mid-stream, the read moves only to a replica proven by a checksum to
//     hold the same bytes (sameBytes); with none left it retries the same
//     replica at the same offset for up to proxy_idle_timeout, when its
//     validators are strong or a checksum proves it unchanged (see
//     failoverReader), and then aborts the response, so the client sees a
//     broken transfer, never a splice of two files.
//   - A replica silent for proxy_idle_timeout is left like a failed one.
func (f *Federator) proxy(rq *request, rk []ranked, fresh bool) error {
	w, r, s, p := rq.w, rq.r, rq.s, rq.p
	size := rk[0].r.ver.size
	reps := make([]*replica, 0, len(rk))
	for _, x := range rk {
		if x.r.ver.size == size {
			reps = append(reps, x.r)
		}
	}
	w.Header().Del("Link")
	fr := &failoverReader{ctx: r.Context(), f: f, s: s, p: p, idle: s.cfg.ProxyIdleTimeout.D()}
	defer fr.Close()
	err := httpx.ServeContent(w, r, size, &proxySource{f: f, fr: fr, reps: reps, fresh: fresh})
	if err == nil {
		return nil
	}
	if errors.Is(err, errStale) {
		s.invalidate(p, 0)
		if !fresh {
			return errStale
		}
	}
	f.writeOpenFailure(rq, err)
	return nil
}

// proxySource is a proxied file as httpx.ServeContent reads it: the
// replicas, opened by Describe (the validators are those of the replica
// that answers), read through the failoverReader.
type proxySource struct {
	f     *Federator
	fr    *failoverReader
	reps  []*replica
	fresh bool
}

// Describe opens the first range the answer will send (an empty one for
// a Range that cannot be served: the open confirms the size) on the
// first replica that still holds the version looked up, and gives that
// replica's validators. A replica whose validators are weak is read
// forward, every range from one read (openFirstOf).
func (ps *proxySource) Describe(want []httpx.Range) (httpx.Content, error) {
	fr := ps.fr
	if len(want) == 0 {
		want = []httpx.Range{{}}
	}
	if err := fr.openFirstOf(ps.reps, want, ps.fresh); err != nil {
		return httpx.Content{}, err
	}
	if fr.changed {
		fr.s.invalidate(fr.p, 0) // a replica ranked above the served one has changed
	}
	fr.waitSums(sumWait)
	ct := httpx.Content{ModTime: fr.ver.ModTime, Weak: !fr.ver.Strong, Forward: !fr.ver.Strong}
	if fr.ver.ETag != "" {
		ct.ETag = `"` + fr.ver.ETag + `"`
	}
	return ct, nil
}

// Digests are the served replica's checksums: from its metadata, or
// asked of it; when its validators are weak, only the adler32 asked after
// it opened (a checksum from its look-up may be of a file since replaced
// under the same validators).
func (ps *proxySource) Digests(algos []string) (map[string]string, error) {
	fr := ps.fr
	if !fr.ver.Strong {
		if v := fr.servedSum(httpx.Adler32); v != "" {
			return map[string]string{httpx.Adler32: v}, nil
		}
		return nil, nil
	}
	return ps.f.servedSums(fr.ctx, fr.served, algos), nil
}

// Prepare moves the read to the first range to send when it is not the
// one Describe opened (an If-Range that did not match).
func (ps *proxySource) Prepare(send []httpx.Range, head bool) error {
	if head {
		return nil
	}
	return ps.fr.at(send[0])
}

// WriteRange copies rg from the served version.
func (ps *proxySource) WriteRange(w io.Writer, rg httpx.Range) error {
	if err := ps.fr.at(rg); err != nil {
		return err
	}
	if !ps.fr.copyTo(w) {
		return fmt.Errorf("federation: proxied read of %s broke at offset %d", ps.fr.p, ps.fr.off)
	}
	return nil
}

// servedSums returns the checksums algos of the replica served: from its
// metadata, or asked of it.
func (f *Federator) servedSums(ctx context.Context, rep *replica, algos []string) map[string]string {
	out := map[string]string{}
	for _, a := range algos {
		if v := rep.checksum(ctx, a); v != "" {
			out[a] = v
		}
	}
	return out
}

// maxFailovers bounds the moves to other replicas one proxied read makes
// without any progress.
const maxFailovers = 8

// retryPause is the wait between tries of the served replica when no
// other holds the same bytes.
const retryPause = 100 * time.Millisecond

// copyBufSize is the size of the buffer a proxied range is copied
// through; each proxied request in flight holds one.
const copyBufSize = 256 << 10

// copyBufs recycles copy buffers between proxied requests.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// writerOnly is an io.Writer and nothing else, so io.CopyBuffer uses the
// buffer it is given.
type writerOnly struct{ w io.Writer }

func (wo writerOnly) Write(p []byte) (int, error) { return wo.w.Write(p) }

// failoverReader reads one range after another of the version it first
// opened (served, ver) and moves, when a replica fails, to another that
// holds the same bytes, at the offset reached.
//
// Two reads are joined in one answer (a resume after a failure, another
// replica, the next range of a multipart answer) only when the second is
// proven to read the bytes of the version served: by strong validators
// (endpoint.SameBytes), or by a checksum of the served replica, the same
// before and after it opened, equal to the second one's asked after that
// one opened (proveSum). Equal weak validators prove nothing: nginx's ETag
// stays the same when a file is replaced by one of the same size with its
// time kept. Without a proof the read fails, and the client sees a broken
// transfer, never a splice. So that a multipart answer from a weak
// replica needs no proof, its ranges come in ascending order from one
// read that spans them (the bytes between them are read and dropped).
type failoverReader struct {
	ctx  context.Context
	f    *Federator
	s    *snapshot
	p    string // logical path
	idle time.Duration

	served *replica      // the replica whose version is sent
	ver    endpoint.Info // that version, as its open confirmed it
	others []*replica    // the other replicas of the same size, rank order
	// changed: a replica ranked above served answered with another
	// version or not found; the cached entry is out of date.
	changed bool

	cur *watched // the open read, nil between replicas
	// off and left are the offset reached and what is left of the range
	// being read; end is where the open read stops (past off+left when
	// it spans several ranges).
	off, left, end int64
	// sent counts the bytes read for the answer: from the first one on,
	// another read is joined only once proven (see the type's doc).
	sent int64
	errs []error
	// fails counts replica failures since the last byte read, and
	// retryUntil is when retrying the served replica stops (zero: not
	// retrying): a replica that opens and then fails at once must not
	// loop forever.
	fails      int
	retryUntil time.Time

	// sums is the served replica's checksum, asked in the background
	// when a failover could need it to prove another replica identical
	// (sameBytes), or, for a replica whose validators are weak, to
	// prove any later read of the same bytes (proveSum); nil when not
	// asked.
	sums *sumFuture
	// preSum is the served replica's adler32 known before it was opened
	// (its look-up, or asked just then) when its validators are weak;
	// "" when it could not say.
	preSum string
	proven map[*replica]bool // sameBytes answers, kept for the request
}

// openFirst opens rg of the first replica of reps that answers with the
// version its metadata describes. When fresh is false (the metadata came
// from the cache), a replica that changed or lost the file stops the
// search with errStale: the caller looks the path up again rather than
// serve a version chosen from stale metadata.
func (fr *failoverReader) openFirst(reps []*replica, rg httpx.Range, fresh bool) error {
	return fr.openFirstOf(reps, []httpx.Range{rg}, fresh)
}

// openFirstOf is openFirst for the ranges of an answer, disjoint, want[0]
// read first; with several, a replica whose validators are weak is
// opened once over all of them, from the lowest (httpx.Content.Forward
// sends them in ascending order).
func (fr *failoverReader) openFirstOf(reps []*replica, want []httpx.Range, fresh bool) error {
	stale := false
	for i, rep := range reps {
		rg := want[0]
		end := rg.Start + rg.Length
		if !rep.ver.strong && len(want) > 1 {
			rg = slices.MinFunc(want, func(a, b httpx.Range) int { return cmp.Compare(a.Start, b.Start) })
			for _, x := range want {
				end = max(end, x.Start+x.Length)
			}
		}
		fr.off, fr.left, fr.end = rg.Start, rg.Length, end
		var pre string
		if !rep.ver.strong {
			pre = fr.sumBefore(rep, end-rg.Start >= minProvenRead)
		}
		w, ver, err := fr.open(rep, rg.Start, end-rg.Start)
		if err == nil && !endpoint.SameVersion(rep.info(), ver) {
			w.Close()
			err = fmt.Errorf("%w: %s", errStale, describeVersion(rep.info(), ver))
		}
		if err != nil {
			fr.errs = append(fr.errs, fmt.Errorf("%s: %w", rep.m.name, err))
			if errors.Is(err, errStale) || endpoint.Class(err) == endpoint.ErrNotFound {
				fr.f.m.mismatches.Inc()
				stale = true
				if !fresh {
					return fmt.Errorf("%w: %w", errStale, errors.Join(fr.errs...))
				}
			}
			continue
		}
		fr.served, fr.ver, fr.cur, fr.changed, fr.preSum = rep, rep.info(), w, stale, pre
		fr.others = append(fr.others, reps[:i]...)
		fr.others = append(fr.others, reps[i+1:]...)
		fr.startSums()
		return nil
	}
	// The class of the whole: "not found" only when every replica said
	// so (the rest is text, so that one replica's answer cannot lend
	// its class to all).
	class, allGone := endpoint.ErrUnavailable, len(fr.errs) > 0
	for _, e := range fr.errs {
		allGone = allGone && endpoint.Class(e) == endpoint.ErrNotFound
	}
	if allGone {
		class = endpoint.ErrNotFound
	}
	err := fmt.Errorf("%w: %v", class, errors.Join(fr.errs...))
	if stale {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

// describeVersion says how an opened replica differs from its metadata.
func describeVersion(want, got endpoint.Info) string {
	return fmt.Sprintf("looked up as %d bytes, etag %q, modified %s; opened as %d bytes, etag %q, modified %s",
		want.Size, want.ETag, want.ModTime.UTC().Format(time.RFC3339), got.Size, got.ETag, got.ModTime.UTC().Format(time.RFC3339))
}

// open opens n bytes of rep from off under the idle watch and returns
// what the reader says of the file (rep's metadata when it says nothing).
func (fr *failoverReader) open(rep *replica, off, n int64) (*watched, endpoint.Info, error) {
	octx, cancel := context.WithCancelCause(fr.ctx)
	start := time.Now()
	rep.m.streams.begin()
	rc, err := rep.m.ep.Open(octx, rep.path, off, n)
	if err != nil {
		rep.m.streams.end()
		cancel(nil)
		fr.result(rep, err, time.Since(start))
		return nil, endpoint.Info{}, err
	}
	ver, ok := endpoint.VersionOf(rc)
	if !ok {
		ver = rep.info()
	}
	w := &watched{rc: rc, rep: rep, ctx: octx, cancel: cancel, idle: fr.idle}
	if fr.idle > 0 {
		w.t = time.AfterFunc(fr.idle, func() { cancel(errIdle) })
		w.t.Stop()
	}
	return w, ver, nil
}

// result reports a replica's answer to the passive health check, and
// counts a failure as the endpoint's only when this request is still
// wanted (a client going away is not the endpoint's fault).
func (fr *failoverReader) result(rep *replica, err error, d time.Duration) {
	if fr.ctx.Err() != nil {
		return
	}
	fr.f.requestResult(fr.s, rep.m, err, d)
}

// at makes rg the range read next: within the open read when it lies
// ahead in it (the bytes before it are read and dropped), else seek.
func (fr *failoverReader) at(rg httpx.Range) error {
	if fr.off <= rg.Start && rg.Start+rg.Length <= fr.end && (fr.cur != nil || fr.sent > 0) {
		if gap := rg.Start - fr.off; gap > 0 {
			fr.left = gap
			if n, err := io.Copy(io.Discard, fr); err != nil || n != gap {
				return fmt.Errorf("federation: skipping to offset %d: %w", rg.Start, errors.Join(err, io.ErrUnexpectedEOF))
			}
		}
		fr.left = rg.Length
		return nil
	}
	return fr.seek(rg)
}

// seek ends the current read and opens rg of the served version (or a
// replica proven to hold it).
func (fr *failoverReader) seek(rg httpx.Range) error {
	fr.closeCur()
	fr.off, fr.left, fr.end = rg.Start, rg.Length, rg.Start+rg.Length
	if err := fr.reopen(fr.served, false); err == nil {
		return nil
	}
	return fr.next()
}

// copyTo copies what is left of the current range to w and reports
// whether all of it was sent: by splice(2), socket to socket, while the
// replica read can splice and w can take it (spliceTo), else through a
// buffer.
func (fr *failoverReader) copyTo(w io.Writer) bool {
	want := fr.left
	if want == 0 {
		return true
	}
	var n int64
	if sw, ok := spliceDst(w); ok {
		m, err := fr.spliceTo(sw)
		n += m
		if err != nil {
			if fr.ctx.Err() == nil {
				fr.f.log.WarnContext(fr.ctx, "proxy read failed", "endpoint", fr.served.m.name, "bytes", n, "err", err)
			}
			return false
		}
		if fr.left == 0 {
			return n == want
		}
	}
	// writerOnly hides http.ResponseWriter's ReadFrom, which would copy
	// through a 32 KiB buffer (net.TCPConn cannot splice from an endpoint's
	// reader): big reads and writes cost fewer calls on both sides, and an
	// endpoint reader that works per call (minio-go's object reader hands
	// each Read to a goroutine) pays that cost per copyBufSize, not per
	// 32 KiB.
	bp := copyBufs.Get().(*[]byte)
	m, err := io.CopyBuffer(writerOnly{w}, fr, *bp)
	copyBufs.Put(bp)
	n += m
	if err != nil && fr.ctx.Err() == nil {
		fr.f.log.WarnContext(fr.ctx, "proxy read failed", "endpoint", fr.served.m.name, "bytes", n, "err", err)
	}
	return err == nil && n == want
}

// spliceWriter is a destination that can take body bytes by splice(2):
// the fast path's Writer (fastpath.Writer).
type spliceWriter interface {
	Spliceable() bool
	Splice(move func(dst *net.TCPConn, limit int64) (int64, error)) (int64, error)
}

// spliceDst returns w as a spliceWriter, looking through the Meter that
// counts the answer (it passes every byte on unchanged); nothing else is
// looked through, since a writer that changes the bytes (a multipart
// part) must see them.
func spliceDst(w io.Writer) (spliceWriter, bool) {
	if m, ok := w.(*httpx.Meter); ok {
		w = m.ResponseWriter
	}
	sw, ok := w.(spliceWriter)
	return sw, ok && sw.Spliceable()
}

// spliceTo moves what is left of the range to sw's connection with
// splice(2) (Ready and SpliceTo, failing over as Read does) until it is
// all sent, or the read can no longer splice (a replica that cannot:
// the rest goes through Read), or it fails. A failed SpliceTo ends the
// answer: its bytes may have left the replica's socket without reaching
// the client's.
func (fr *failoverReader) spliceTo(sw spliceWriter) (int64, error) {
	var sent int64
	for fr.left > 0 {
		n, err := fr.Ready()
		if errors.Is(err, endpoint.ErrNoSplice) {
			return sent, nil
		}
		if err != nil {
			return sent, err
		}
		m, err := sw.Splice(func(dst *net.TCPConn, limit int64) (int64, error) {
			return fr.SpliceTo(dst, min(n, limit))
		})
		sent += m
		if err != nil {
			return sent, err
		}
		if m == 0 {
			return sent, io.ErrShortWrite // the answer has no room left: never spin
		}
	}
	return sent, nil
}

func (fr *failoverReader) Read(p []byte) (int, error) {
	for {
		if fr.left <= 0 {
			return 0, io.EOF
		}
		if fr.cur == nil {
			if err := fr.next(); err != nil {
				return 0, err
			}
		}
		if int64(len(p)) > fr.left {
			p = p[:fr.left]
		}
		n, err := fr.cur.Read(p)
		fr.off += int64(n)
		fr.left -= int64(n)
		fr.sent += int64(n)
		fr.cur.rep.m.mm.proxied.Add(float64(n))
		if fr.left == 0 {
			return n, nil
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			if err := fr.lost(err, n > 0); err != nil {
				return n, err
			}
		}
		if n > 0 {
			return n, nil
		}
	}
}

// lost drops the current replica read, which failed with err (after
// some bytes when progressed), so that the next read fails over. It
// returns the context's error when the read is no longer wanted.
func (fr *failoverReader) lost(err error, progressed bool) error {
	if fr.ctx.Err() != nil {
		return fr.ctx.Err()
	}
	rep := fr.cur.rep
	fr.closeCur()
	if progressed {
		fr.fails, fr.retryUntil = 0, time.Time{}
	}
	fr.fails++
	fr.result(rep, err, 0)
	fr.errs = append(fr.errs, fmt.Errorf("%s: at offset %d: %w", rep.m.name, fr.off, err))
	fr.f.m.failovers.Inc()
	return nil
}

// Ready is endpoint.Splicer's: it waits for the current replica's next
// bytes, failing over as Read does when the replica fails; ErrNoSplice
// when the replica read cannot splice.
func (fr *failoverReader) Ready() (int64, error) {
	for {
		if fr.left <= 0 {
			return 0, io.EOF
		}
		if fr.cur == nil {
			if err := fr.next(); err != nil {
				return 0, err
			}
		}
		n, err := fr.cur.Ready()
		if err == nil {
			return min(n, fr.left), nil
		}
		if errors.Is(err, endpoint.ErrNoSplice) {
			return 0, err
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err := fr.lost(err, false); err != nil {
			return 0, err
		}
	}
}

// SpliceTo is endpoint.Splicer's. Ready made sure the bytes are there,
// so an error is most likely dst's (the client gone): the replica read
// is dropped, not counted against the replica, and the next read
// reopens at the offset reached.
func (fr *failoverReader) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	if fr.cur == nil {
		return 0, endpoint.ErrNoSplice
	}
	m, err := fr.cur.SpliceTo(dst, min(n, fr.left))
	fr.off += m
	fr.left -= m
	fr.sent += m // sent as Read's are: a later read must be proven to join them
	fr.cur.rep.m.mm.proxied.Add(float64(m))
	fr.f.m.spliced.Add(float64(m))
	if m > 0 {
		fr.fails, fr.retryUntil = 0, time.Time{}
	}
	if err != nil {
		fr.closeCur()
	}
	return m, err
}

// next opens the rest of the range on another replica proven to hold the
// same bytes, else on the served one again (a restart, a dropped
// connection), retrying it for up to the idle timeout.
func (fr *failoverReader) next() error {
	for len(fr.others) > 0 && fr.fails <= maxFailovers {
		rep := fr.others[0]
		fr.others = fr.others[1:]
		if ok, why := fr.sameBytes(rep); !ok {
			fr.errs = append(fr.errs, fmt.Errorf("%s: not used: %s", rep.m.name, why))
			continue
		}
		if err := fr.reopen(rep, true); err == nil {
			// Keep rep for later ranges and failovers: it holds the
			// same bytes as served.
			fr.others = append(fr.others, rep)
			return nil
		}
	}
	if fr.sent > 0 && !fr.ver.Strong && fr.proofSum() == "" {
		// Bytes of the served replica are sent, and nothing could prove
		// a new read of it holds the same ones.
		return fmt.Errorf("federation: cannot resume at offset %d: %w: %w", fr.off, errUnproven, errors.Join(fr.errs...))
	}
	now := time.Now()
	if fr.retryUntil.IsZero() {
		fr.retryUntil = now.Add(max(fr.idle, time.Second))
	}
	for wait := fr.fails > 1; ; wait = true {
		if wait {
			// The last try of it failed too: give it a moment.
			if time.Now().After(fr.retryUntil) {
				break
			}
			select {
			case <-fr.ctx.Done():
				return fr.ctx.Err()
			case <-time.After(retryPause):
			}
		}
		err := fr.reopen(fr.served, false)
		if err == nil {
			return nil
		}
		if endpoint.Class(err) != endpoint.ErrUnavailable || errors.Is(err, errStale) || errors.Is(err, errUnproven) {
			break
		}
	}
	return fmt.Errorf("federation: no replica holding the same bytes could go on from offset %d: %w", fr.off, errors.Join(fr.errs...))
}

// reopen opens the rest of the read on rep and checks that the bytes
// are still those of the version served: the same size always, for the
// served replica itself (or when other asks it) the same ETag and
// modification time, and, once bytes were sent, a proof that they are
// the same bytes when the validators cannot say (proveSum).
func (fr *failoverReader) reopen(rep *replica, other bool) error {
	w, ver, err := fr.open(rep, fr.off, fr.end-fr.off)
	if err != nil {
		fr.errs = append(fr.errs, fmt.Errorf("%s: reopen at %d: %w", rep.m.name, fr.off, err))
		return err
	}
	want := fr.ver
	if other {
		want = rep.info() // proven to hold ver's bytes when it was looked up
	}
	if !endpoint.SameVersion(want, ver) || (ver.Size >= 0 && ver.Size != fr.ver.Size) {
		w.Close()
		fr.f.m.mismatches.Inc()
		err := fmt.Errorf("%w: %s", errStale, describeVersion(want, ver))
		fr.errs = append(fr.errs, fmt.Errorf("%s: %w", rep.m.name, err))
		return err
	}
	if fr.sent > 0 && !endpoint.SameBytes(want, ver) {
		if err := fr.proveSum(rep); err != nil {
			w.Close()
			fr.errs = append(fr.errs, fmt.Errorf("%s: reopen at %d: %w", rep.m.name, fr.off, err))
			return err
		}
	}
	fr.cur = w
	return nil
}

// errUnproven: a read would join bytes of two reads, and nothing proves
// them bytes of one file.
var errUnproven = errors.New("nothing proves the bytes are those of the version served (weak validators and no checksum)")

// proveSum proves that rep, just opened, holds the bytes of the version
// served, when validators cannot: its checksum, asked now, equals the
// one the served replica gave after its first open (proofSum). A
// checksum asked now is of the file the read just opened reads (or of a
// later one: then they differ, and the read is refused, safely).
func (fr *failoverReader) proveSum(rep *replica) error {
	want := fr.proofSum()
	if want == "" {
		return errUnproven
	}
	ctx, cancel := context.WithTimeout(fr.ctx, rep.m.cfg.TimeoutOrDefault())
	defer cancel()
	got, err := endpoint.Checksum(ctx, rep.m.ep, rep.path, httpx.Adler32)
	switch {
	case err != nil:
		return fmt.Errorf("%w: asking its adler32: %w", errUnproven, err)
	case got != want:
		fr.f.m.mismatches.Inc()
		return fmt.Errorf("%w: adler32 %s now, %s when the answer began", errStale, got, want)
	}
	return nil
}

// proofSum is the served replica's adler32 that proveSum compares with
// (servedSum); "" when there is none.
func (fr *failoverReader) proofSum() string { return fr.servedSum(httpx.Adler32) }

func (fr *failoverReader) closeCur() {
	if fr.cur != nil {
		fr.cur.Close()
		fr.cur = nil
	}
}

// Close ends the read and waits for the background checksum request.
func (fr *failoverReader) Close() error {
	fr.closeCur()
	if fr.sums != nil {
		fr.sums.cancel()
		<-fr.sums.done
	}
	return nil
}

// watched is a replica read under an idle watch: a Read that gets
// nothing for idle cancels the read's context, so that a stalled replica
// (kill -STOP, a hung disk server) fails like a broken one and the read
// moves on. The timer runs only while a Read waits, not while the client
// is slow to take what was read.
type watched struct {
	rc     io.ReadCloser
	rep    *replica
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   time.Duration
	t      *time.Timer // nil: no idle limit
	closed bool
}

func (w *watched) Read(p []byte) (int, error) {
	if w.t != nil {
		w.t.Reset(w.idle)
	}
	n, err := w.rc.Read(p)
	if w.t != nil {
		w.t.Stop()
	}
	if err != nil && err != io.EOF && errors.Is(context.Cause(w.ctx), errIdle) {
		err = fmt.Errorf("%w: nothing for %v: %w", endpoint.ErrUnavailable, w.idle, errIdle)
	}
	return n, err
}

// Ready is endpoint.Splicer's, under the idle watch as Read is.
func (w *watched) Ready() (int64, error) {
	sp, ok := w.rc.(endpoint.Splicer)
	if !ok {
		return 0, endpoint.ErrNoSplice
	}
	if w.t != nil {
		w.t.Reset(w.idle)
	}
	n, err := sp.Ready()
	if w.t != nil {
		w.t.Stop()
	}
	if err != nil && err != io.EOF && !errors.Is(err, endpoint.ErrNoSplice) && errors.Is(context.Cause(w.ctx), errIdle) {
		err = fmt.Errorf("%w: nothing for %v: %w", endpoint.ErrUnavailable, w.idle, errIdle)
	}
	return n, err
}

// SpliceTo is endpoint.Splicer's.
func (w *watched) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	sp, ok := w.rc.(endpoint.Splicer)
	if !ok {
		return 0, endpoint.ErrNoSplice
	}
	return sp.SpliceTo(dst, n)
}

func (w *watched) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.t != nil {
		w.t.Stop()
	}
	err := w.rc.Close()
	w.cancel(nil)
	w.rep.m.streams.end()
	return err
}

// sumWait bounds how long a proxied read waits, before its first byte,
// for the checksum that lets it fail over (startSums). A storage role
// answers from its kept checksum in well under a millisecond; a file it
// must read whole to sum goes on without it, and can fail over only to
// a replica with the same ETag until the sum arrives.
const sumWait = 500 * time.Millisecond

// waitSums waits up to d for the served replica's checksum.
func (fr *failoverReader) waitSums(d time.Duration) {
	if fr.sums == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-fr.sums.done:
	case <-t.C:
	case <-fr.ctx.Done():
	}
}

// sumFuture is a checksum asked in the background. The sum is learned
// by the replica too (replica.learn) when its validators are strong.
type sumFuture struct {
	algo   string
	value  string // set before done closes; "" when the replica could not say
	done   chan struct{}
	cancel context.CancelFunc
}

// minProvenRead is the smallest read of a replica with weak validators
// for which a checksum not known yet is asked before it opens, so that
// it can be resumed if it breaks. A smaller one (a ROOT basket) is not
// worth the extra request: it breaks, and the client asks again.
const minProvenRead = 16 << 20

// sumBefore is rep's adler32 as known before it is opened: from its
// look-up (or learned since), else, when ask, asked now for no longer
// than sumWait (a server may read the whole file to answer); "" when it
// cannot say.
func (fr *failoverReader) sumBefore(rep *replica, ask bool) string {
	if v := rep.sum(httpx.Adler32); v != "" || !ask {
		return v
	}
	ctx, cancel := context.WithTimeout(fr.ctx, min(sumWait, rep.m.cfg.TimeoutOrDefault()))
	defer cancel()
	v, err := endpoint.Checksum(ctx, rep.m.ep, rep.path, httpx.Adler32)
	if err != nil {
		return ""
	}
	return v
}

// startSums asks the served replica for its adler32 in the background,
// at the start, while it still answers: when a failover could need it
// (other replicas of the same size, and no checksum in its metadata),
// and when its validators are weak and it gave one before it was opened
// (preSum). A weak replica's version says nothing of its bytes, so a
// checksum proves which bytes its read holds only when the same before
// and after the open (servedSum); a later read is proven by the same
// checksum asked after it opened (proveSum). A failover waits for it.
func (fr *failoverReader) startSums() {
	weak := !fr.ver.Strong
	if !weak && (len(fr.others) == 0 || fr.served.sum(httpx.Adler32) != "") {
		return
	}
	if weak && fr.preSum == "" {
		return // no checksum to be had: nothing can prove a second read
	}
	ctx, cancel := context.WithCancel(fr.ctx)
	sf := &sumFuture{algo: httpx.Adler32, done: make(chan struct{}), cancel: cancel}
	fr.sums = sf
	rep := fr.served
	go func() {
		defer close(sf.done)
		if !weak {
			sf.value = rep.checksum(ctx, sf.algo) // bounded by the endpoint's timeout
			return
		}
		ctx, cancel := context.WithTimeout(ctx, rep.m.cfg.TimeoutOrDefault())
		defer cancel()
		if v, err := endpoint.Checksum(ctx, rep.m.ep, rep.path, sf.algo); err == nil {
			sf.value = v
			if v == fr.preSum {
				rep.learn(sf.algo, v) // the next read of it needs not ask before opening
			}
		}
	}()
}

// servedSum is the served replica's checksum for algo that other reads
// are compared with: from its look-up (or learned) when its validators
// are strong; else only its adler32, when the same before it opened and
// after (startSums): the file its read holds had it.
func (fr *failoverReader) servedSum(algo string) string {
	if fr.sums != nil {
		<-fr.sums.done
	}
	if fr.ver.Strong {
		return fr.served.sum(algo)
	}
	if algo == httpx.Adler32 && fr.sums != nil && fr.sums.value == fr.preSum {
		return fr.sums.value
	}
	return ""
}

// sameBytes reports whether rep holds the bytes of the version served,
// and if not, why: the same size and the same checksum.
// A pair of replicas proven different counts as a disagreement.
func (fr *failoverReader) sameBytes(rep *replica) (bool, string) {
	if ok, seen := fr.proven[rep]; seen {
		return ok, "differs from the replica served"
	}
	ok, why := fr.compare(rep)
	if fr.proven == nil {
		fr.proven = map[*replica]bool{}
	}
	fr.proven[rep] = ok
	return ok, why
}

func (fr *failoverReader) compare(rep *replica) (bool, string) {
	if rep.ver.size != fr.ver.Size {
		return false, "another size"
	}
	// Equal ETags prove nothing across servers: an entity tag tells
	// versions of one resource apart (RFC 9110 §8.8.3), and nginx's is
	// the modification second and the size, so two different files
	// written in the same second share it. Only checksums compare.
	for _, algo := range []string{httpx.Adler32, httpx.MD5, httpx.CRC32C} {
		want := fr.servedSum(algo)
		if want == "" {
			continue
		}
		got := rep.checksum(fr.ctx, algo)
		if got == "" {
			continue
		}
		if got == want {
			return true, ""
		}
		fr.f.disagree(fr.p, fr.served, rep, fmt.Sprintf("%s %s != %s", algo, want, got))
		return false, fmt.Sprintf("%s %s, the replica served has %s", algo, got, want)
	}
	return false, "no checksum proves it holds the same bytes"
}

// checksum returns the replica's checksum for algo: known (sum), else
// asked of its endpoint within the endpoint's timeout and learned; ""
// when the endpoint cannot say.
func (r *replica) checksum(ctx context.Context, algo string) string {
	if v := r.sum(algo); v != "" {
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, r.m.cfg.TimeoutOrDefault())
	defer cancel()
	v, err := endpoint.Checksum(ctx, r.m.ep, r.path, algo)
	if err != nil {
		return ""
	}
	r.learn(algo, v)
	return v
}

// sum returns the replica's checksum for algo, from its metadata or
// learned since, or "".
func (r *replica) sum(algo string) string {
	if v, ok := r.ver.sums[algo]; ok {
		return v
	}
	if r.learned != nil {
		if l := r.learned.p.Load(); l != nil {
			return (*l)[algo]
		}
	}
	return ""
}

// learn remembers a checksum of the replica asked after its look-up, for
// as long as the entry lives (the file it describes is the one summed:
// a replaced file is caught by the version check on open and looked up
// afresh).
func (r *replica) learn(algo, v string) {
	if r.learned == nil {
		return
	}
	for {
		old := r.learned.p.Load()
		m := map[string]string{algo: v}
		if old != nil {
			for k, x := range *old {
				if k != algo {
					m[k] = x
				}
			}
		}
		if r.learned.p.CompareAndSwap(old, &m) {
			if e := r.learned.e; e != nil {
				e.keep()
			}
			return
		}
	}
}
