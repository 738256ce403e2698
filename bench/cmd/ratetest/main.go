// Command ratetest is the HTTP load generator of bench/federation.sh: it
// measures a server's request rate and latency over keep-alive
// connections, either saturated (closed loop: every connection sends its
// next request as soon as the last answer is in) or at a fixed offered
// rate (open loop: request i is due at start + i/rate and its latency is
// measured from that due time, so a stalled server is charged for the
// requests it delayed; this is wrk2's coordinated-omission correction).
//
//	ratetest -url http://127.0.0.1:8080 -pattern /data/d%03d/f%05d -files 1000 -c 64 -d 10s -method HEAD
//	ratetest -url ... -rate 20000 -c 64 -d 10s           # p99 at a fixed offered load
//	ratetest -url ... -unique -first 1000 -files 30000   # every path once (cold metadata)
//
// It speaks HTTP/1.1 by hand over one TCP connection per client (no
// redirects followed, HEAD answers read without a body) so that it costs
// the shared cores less than net/http's client would. It prints one line
// of key=value pairs (rate, percentiles in ms, status counts) for the
// script to parse.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ratetest:", err)
		os.Exit(1)
	}
}

// opts are the command-line settings.
type opts struct {
	url     string
	method  string
	pattern string // fmt pattern of the path; %d... gets (i/per, i) or i
	per     int    // files per directory for two-verb patterns
	first   int    // first file index
	files   int    // number of file indexes
	conns   int
	dur     time.Duration
	rate    float64
	unique  bool
	max     int64 // stop after this many requests (0: no limit)
	expect  int
	timeout time.Duration
}

func run() error {
	var o opts
	flag.StringVar(&o.url, "url", "", "base URL http://host:port (required)")
	flag.StringVar(&o.method, "method", "GET", "GET or HEAD")
	flag.StringVar(&o.pattern, "pattern", "/data/d%03d/f%05d", "path pattern: with two verbs they get (index/per, index), with one the index")
	flag.IntVar(&o.per, "per", 100, "files per directory (two-verb patterns)")
	flag.IntVar(&o.first, "first", 0, "first file index")
	flag.IntVar(&o.files, "files", 1000, "number of file indexes, from -first")
	flag.IntVar(&o.conns, "c", 64, "keep-alive connections (one client each)")
	flag.DurationVar(&o.dur, "d", 10*time.Second, "duration")
	flag.Float64Var(&o.rate, "rate", 0, "fixed offered rate in requests/s over all connections (0: saturate)")
	flag.BoolVar(&o.unique, "unique", false, "request every path at most once (stop when they run out)")
	flag.Int64Var(&o.max, "n", 0, "stop after this many requests (0: only -d)")
	flag.IntVar(&o.expect, "expect", 0, "status every answer should have (0: any); others are counted as bad")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request I/O deadline")
	flag.Parse()
	if o.url == "" || o.files <= 0 || o.conns <= 0 || o.per <= 0 {
		return errors.New("give -url, and positive -files, -c, -per")
	}
	u, err := url.Parse(o.url)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("want -url http://host:port, got %q", o.url)
	}
	return bench(o, u.Host)
}

// result is what one client measured.
type result struct {
	lat    []time.Duration
	status map[int]int64
	errs   int64
	lastEr error
}

func bench(o opts, host string) error {
	verbs := strings.Count(o.pattern, "%") - 2*strings.Count(o.pattern, "%%")
	pathOf := func(i int) string {
		if verbs >= 2 {
			return fmt.Sprintf(o.pattern, i/o.per, i)
		}
		return fmt.Sprintf(o.pattern, i)
	}
	// Precompute request lines: formatting in the hot loop would cost
	// the shared cores.
	reqs := make([][]byte, o.files)
	for i := range reqs {
		reqs[i] = []byte(o.method + " " + pathOf(o.first+i) + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: ratetest\r\n\r\n")
	}
	head := o.method == "HEAD"

	var next atomic.Int64                          // request sequence number
	start := time.Now().Add(50 * time.Millisecond) // let every client dial first
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(o.dur))
	defer cancel()
	results := make([]result, o.conns)
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(o.conns)
	var dialErr atomic.Pointer[error]
	for w := 0; w < o.conns; w++ {
		wg.Go(func() {
			res := &results[w]
			res.status = map[int]int64{}
			c, err := net.Dial("tcp", host)
			ready.Done()
			if err != nil {
				dialErr.Store(&err)
				return
			}
			cl := &client{c: c, br: bufio.NewReaderSize(c, 16<<10), head: head, timeout: o.timeout, host: host}
			defer func() { cl.c.Close() }()
			ready.Wait()
			time.Sleep(time.Until(start))
			for k := 0; ; k++ {
				var seq int64
				var due time.Time
				if o.rate > 0 {
					// Open loop, per connection: this client's k-th
					// request is global request w + k*conns.
					seq = int64(w) + int64(k)*int64(o.conns)
					due = start.Add(time.Duration(float64(seq) / o.rate * 1e9))
					if d := time.Until(due); d > 0 {
						t := time.NewTimer(d)
						select {
						case <-ctx.Done():
							t.Stop()
							return
						case <-t.C:
						}
					}
				} else {
					seq = next.Add(1) - 1
					due = time.Now()
				}
				if ctx.Err() != nil || (o.max > 0 && seq >= o.max) {
					return
				}
				idx := int(seq % int64(o.files))
				if o.unique && seq >= int64(o.files) {
					return
				}
				code, err := cl.do(reqs[idx])
				if err != nil {
					res.errs++
					res.lastEr = err
					if err = cl.redial(); err != nil {
						return
					}
					continue
				}
				res.lat = append(res.lat, time.Since(due))
				res.status[code]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := dialErr.Load(); e != nil {
		return fmt.Errorf("dial %s: %w", host, *e)
	}
	var all []time.Duration
	status := map[int]int64{}
	var errs int64
	var lastEr error
	for _, r := range results {
		all = append(all, r.lat...)
		for k, v := range r.status {
			status[k] += v
		}
		errs += r.errs
		if r.lastEr != nil {
			lastEr = r.lastEr
		}
	}
	slices.Sort(all)
	pct := func(q float64) string {
		if len(all) == 0 {
			return "nan"
		}
		i := int(q * float64(len(all)-1))
		return strconv.FormatFloat(float64(all[i])/1e6, 'f', 3, 64)
	}
	var bad int64
	codes := make([]int, 0, len(status))
	for k := range status {
		codes = append(codes, k)
		if o.expect != 0 && k != o.expect {
			bad += status[k]
		}
	}
	slices.Sort(codes)
	var sb bytes.Buffer
	for _, k := range codes {
		fmt.Fprintf(&sb, "%d:%d,", k, status[k])
	}
	st := strings.TrimSuffix(sb.String(), ",")
	if st == "" {
		st = "none"
	}
	fmt.Printf("requests=%d seconds=%.3f rate=%.0f p50_ms=%s p90_ms=%s p99_ms=%s max_ms=%s status=%s bad=%d errors=%d\n",
		len(all), elapsed.Seconds(), float64(len(all))/elapsed.Seconds(), pct(0.50), pct(0.90), pct(0.99), pct(1), st, bad, errs)
	if lastEr != nil {
		fmt.Fprintln(os.Stderr, "ratetest: last error:", lastEr)
	}
	return nil
}

// client is one keep-alive HTTP/1.1 connection.
type client struct {
	c       net.Conn
	br      *bufio.Reader
	head    bool
	timeout time.Duration
	host    string
}

func (cl *client) redial() error {
	cl.c.Close()
	c, err := net.DialTimeout("tcp", cl.host, cl.timeout)
	if err != nil {
		return err
	}
	cl.c = c
	cl.br.Reset(c)
	return nil
}

// do sends one request and reads its whole answer; it returns the status.
func (cl *client) do(req []byte) (int, error) {
	if cl.timeout > 0 {
		_ = cl.c.SetDeadline(time.Now().Add(cl.timeout))
	}
	if _, err := cl.c.Write(req); err != nil {
		return 0, err
	}
	line, err := cl.br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	clen, chunked, closeConn := int64(-1), false, false
	for {
		h, err := cl.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case asciiEq(k, "content-length"):
			clen, err = strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bad content-length %q", v)
			}
		case asciiEq(k, "transfer-encoding"):
			chunked = bytes.Contains(bytes.ToLower(v), []byte("chunked"))
		case asciiEq(k, "connection"):
			closeConn = bytes.EqualFold(v, []byte("close"))
		}
	}
	switch {
	case cl.head || code == 204 || code == 304 || (code >= 100 && code < 200):
	case chunked:
		if err := cl.skipChunked(); err != nil {
			return 0, err
		}
	case clen >= 0:
		if _, err := cl.br.Discard(int(clen)); err != nil {
			return 0, err
		}
	default:
		return 0, errors.New("answer without length on a keep-alive connection")
	}
	if closeConn {
		return code, cl.redial()
	}
	return code, nil
}

func (cl *client) skipChunked() error {
	for {
		line, err := cl.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		s, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		n, err := strconv.ParseInt(s, 16, 64)
		if err != nil {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				l, err := cl.br.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(l) <= 2 {
					return nil
				}
			}
		}
		if _, err := cl.br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}

// asciiEq reports whether b equals the lower-case s, ignoring ASCII case.
func asciiEq(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
