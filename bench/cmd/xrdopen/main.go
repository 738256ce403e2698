// Command xrdopen measures an XRootD redirector's open rate, the figure
// bench/federation.sh sets the federator's redirect rate beside. Workers
// (64 by default, one connection each) open files for a fixed time:
//
//	xrdopen -addr 127.0.0.1:1094 -mode follow   -c 64 -d 10s -files 1000
//	xrdopen -addr 127.0.0.1:1094 -mode redirect -c 64 -d 10s -files 1000 -unique
//
// Mode "follow" is what a real open costs: kXR_open at the redirector,
// its kXR_redirect followed to the data server, kXR_open there and
// kXR_close; each worker keeps its session to the redirector and to each
// data server it was sent to. Mode "redirect" counts the redirector's
// answer alone. Both speak the few protocol messages needed themselves
// (the handshake and kXR_login of package xrdwire, kXR_open, kXR_close;
// XRootD protocol 5, "Client Request Format"): go-hep's client always follows
// redirects with no hook to stop it, and with v0.40.0 a client that has
// been sent to both data servers stops getting answers to kXR_close (the
// third open+close of a loop hangs until its deadline). Mode "gohep" is
// "follow" with go-hep's client (one per worker), kept to show that.
// kXR_wait answers (the redirector still looking a file up) are obeyed
// and their wait is part of the latency. With -missing the paths do not
// exist and a kXR_NotFound answer counts as done.
// It prints one line of key=value pairs.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"go-hep.org/x/hep/xrootd"
	"go-hep.org/x/hep/xrootd/xrdfs"
	"go-hep.org/x/hep/xrootd/xrdproto"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "xrdopen:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "", "redirector host:port (required)")
	mode := flag.String("mode", "follow", "follow (redirect followed: open + close at the data server), redirect (count the redirect answer), or gohep (follow, with go-hep's client)")
	pattern := flag.String("pattern", "/data/d%03d/f%05d", "path pattern: with two verbs they get (index/per, index), with one the index")
	per := flag.Int("per", 100, "files per directory (two-verb patterns)")
	first := flag.Int("first", 0, "first file index")
	files := flag.Int("files", 1000, "number of file indexes, from -first")
	conns := flag.Int("c", 64, "workers, one client/connection each")
	dur := flag.Duration("d", 10*time.Second, "duration")
	unique := flag.Bool("unique", false, "open every path at most once (stop when they run out)")
	timeout := flag.Duration("timeout", 20*time.Second, "per-open deadline")
	missing := flag.Bool("missing", false, "the paths do not exist: a not-found answer counts as done (its latency is measured)")
	flag.Parse()
	if *addr == "" || *files <= 0 || *conns <= 0 || *per <= 0 {
		return errors.New("give -addr, and positive -files, -c, -per")
	}
	if *mode != "follow" && *mode != "redirect" && *mode != "gohep" {
		return fmt.Errorf("unknown -mode %q", *mode)
	}
	verbs := strings.Count(*pattern, "%") - 2*strings.Count(*pattern, "%%")
	paths := make([]string, *files)
	for i := range paths {
		if verbs >= 2 {
			paths[i] = fmt.Sprintf(*pattern, (*first+i) / *per, *first+i)
		} else {
			paths[i] = fmt.Sprintf(*pattern, *first+i)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var next atomic.Int64
	type result struct {
		lat     []time.Duration
		errs    int64
		waits   int64
		lastErr error
	}
	results := make([]result, *conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *conns; w++ {
		wg.Go(func() {
			res := &results[w]
			var op opener
			var err error
			if *mode == "gohep" {
				// Not the run's ctx: go-hep's client stops reading
				// when its ctx ends, and an open in flight (or Close)
				// would then wait forever.
				op, err = newFollow(context.Background(), *addr)
			} else {
				var r *raw
				r, err = newRaw(*addr, *timeout)
				if r != nil {
					r.follow = *mode == "follow"
					op = r
				}
			}
			if err != nil {
				res.errs++
				res.lastErr = err
				return
			}
			defer op.close()
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if *unique && seq >= int64(*files) {
					return
				}
				t0 := time.Now()
				octx, ocancel := context.WithTimeout(context.Background(), *timeout)
				waits, err := op.open(octx, paths[seq%int64(*files)])
				ocancel()
				res.waits += int64(waits)
				var se xrdproto.ServerError
				if *missing && errors.As(err, &se) && se.Code == xrdproto.NotFound {
					err = nil
				}
				if err != nil {
					res.errs++
					res.lastErr = err
					if errors.Is(err, errBroken) {
						return
					}
					continue
				}
				res.lat = append(res.lat, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	var errs, waits int64
	var lastErr error
	for _, r := range results {
		all = append(all, r.lat...)
		errs += r.errs
		waits += r.waits
		if r.lastErr != nil {
			lastErr = r.lastErr
		}
	}
	slices.Sort(all)
	pct := func(q float64) string {
		if len(all) == 0 {
			return "nan"
		}
		return strconv.FormatFloat(float64(all[int(q*float64(len(all)-1))])/1e6, 'f', 3, 64)
	}
	fmt.Printf("mode=%s opens=%d seconds=%.3f rate=%.0f p50_ms=%s p99_ms=%s max_ms=%s waits=%d errors=%d\n",
		*mode, len(all), elapsed.Seconds(), float64(len(all))/elapsed.Seconds(), pct(0.5), pct(0.99), pct(1), waits, errs)
	if lastErr != nil {
		fmt.Fprintln(os.Stderr, "xrdopen: last error:", lastErr)
	}
	return nil
}

// opener opens one file (and does whatever the mode counts as an open).
type opener interface {
	open(ctx context.Context, path string) (waits int, err error)
	close()
}

// errBroken means the worker's connection is unusable.
var errBroken = errors.New("xrdopen: connection broken")

// follow opens with go-hep's client, which follows the redirect.
type follow struct{ c *xrootd.Client }

func newFollow(ctx context.Context, addr string) (*follow, error) {
	c, err := xrootd.NewClient(ctx, addr, "bench")
	if err != nil {
		return nil, err
	}
	return &follow{c: c}, nil
}

func (f *follow) open(ctx context.Context, path string) (int, error) {
	fh, err := f.c.FS().Open(ctx, path, xrdfs.OpenModeOwnerRead, xrdfs.OpenOptionsOpenRead)
	if err == nil {
		err = fh.Close(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The client lost an answer; its later requests hang too.
		err = fmt.Errorf("%w: %v", errBroken, err)
	}
	return 0, err
}

// close closes the client, waiting at most 2 s: go-hep's Close can hang
// on a session that stopped answering, and the process exits next.
func (f *follow) close() {
	done := make(chan struct{})
	go func() {
		_ = f.c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// raw is a minimal XRootD client on one connection that stops at the
// redirector's answer.
type raw struct {
	c       net.Conn
	br      *bufio.Reader
	timeout time.Duration
	buf     []byte
	follow  bool            // follow redirects (open + close at the data server)
	ds      map[string]*raw // data-server sessions by host:port, when following
}

// openRead is kXR_open's kXR_open_read option.
const openRead = 0x0010

func newRaw(addr string, timeout time.Duration) (*raw, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := xrdwire.Login(c, "bench"); err != nil {
		c.Close()
		return nil, err
	}
	return &raw{c: c, br: bufio.NewReader(c), timeout: timeout, ds: map[string]*raw{}}, nil
}

// header appends a request's stream ID and request ID.
func (r *raw) header(b []byte, req uint16) []byte {
	b = append(b, 0, 1)
	return binary.BigEndian.AppendUint16(b, req)
}

func (r *raw) open(ctx context.Context, path string) (int, error) {
	waits := 0
	for {
		h, data, err := r.send(ctx, path)
		if err != nil {
			return waits, err
		}
		switch h.Status {
		case xrdproto.Redirect:
			if !r.follow {
				return waits, nil
			}
			ds, p, err := r.dataServer(data, path)
			if err != nil {
				return waits, err
			}
			h, data, err = ds.send(ctx, p)
			if err != nil {
				return waits, err
			}
			if h.Status != xrdproto.Ok {
				return waits, fmt.Errorf("open %s at the data server: status %d: %v", path, h.Status, h.Error(data))
			}
			return waits, ds.closeHandle(data)
		case xrdproto.Wait:
			waits++
			secs := 1
			if len(data) >= 4 {
				secs = max(int(binary.BigEndian.Uint32(data)), 0)
			}
			select {
			case <-ctx.Done():
				return waits, ctx.Err()
			case <-time.After(time.Duration(secs) * time.Second):
			}
		case xrdproto.Ok:
			// The server opened the file itself: close it, count it.
			return waits, r.closeHandle(data)
		case xrdproto.Error:
			return waits, fmt.Errorf("open %s: %w", path, h.Error(data))
		default:
			return waits, fmt.Errorf("open %s: unexpected status %d", path, h.Status)
		}
	}
}

// send sends kXR_open for path (read only) and reads the answer.
func (r *raw) send(ctx context.Context, path string) (xrdproto.ResponseHeader, []byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = r.c.SetDeadline(dl)
	}
	b := r.header(r.buf[:0], xrdwire.ReqOpen)
	b = binary.BigEndian.AppendUint16(b, 0x0100) // mode: owner read
	b = binary.BigEndian.AppendUint16(b, openRead)
	b = append(b, make([]byte, 12)...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(path)))
	b = append(b, path...)
	r.buf = b
	if _, err := r.c.Write(b); err != nil {
		return xrdproto.ResponseHeader{}, nil, fmt.Errorf("%w: %v", errBroken, err)
	}
	h, data, err := xrdproto.ReadResponse(r.br)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", errBroken, err)
	}
	return h, data, nil
}

// closeHandle closes the file whose kXR_open answer is data.
func (r *raw) closeHandle(data []byte) error {
	if len(data) < 4 {
		return errors.New("open: short answer")
	}
	c := r.header(r.buf[:0], xrdwire.ReqClose)
	c = append(c, data[:4]...)
	c = append(c, make([]byte, 16)...)
	if _, err := r.c.Write(c); err != nil {
		return fmt.Errorf("%w: %v", errBroken, err)
	}
	h, d, err := xrdproto.ReadResponse(r.br)
	if err != nil {
		return fmt.Errorf("%w: %v", errBroken, err)
	}
	if h.Status != xrdproto.Ok {
		return fmt.Errorf("close: %w", h.Error(d))
	}
	return nil
}

// dataServer returns the session (made once per worker and server) a
// kXR_redirect answer (port, then host[?opaque]) points to, and the path
// to open there.
func (r *raw) dataServer(data []byte, path string) (*raw, string, error) {
	if len(data) < 5 {
		return nil, "", errors.New("redirect: short answer")
	}
	port := binary.BigEndian.Uint32(data)
	host, opaque, _ := strings.Cut(string(data[4:]), "?")
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	ds := r.ds[addr]
	if ds == nil {
		var err error
		if ds, err = newRaw(addr, r.timeout); err != nil {
			return nil, "", fmt.Errorf("%w: data server %s: %v", errBroken, addr, err)
		}
		r.ds[addr] = ds
	}
	if opaque != "" {
		path += "?" + opaque
	}
	return ds, path, nil
}

func (r *raw) close() {
	for _, ds := range r.ds {
		ds.close()
	}
	r.c.Close()
}
