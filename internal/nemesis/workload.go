package nemesis

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Versions hands out the version of every write of a path (one counter
// per path, shared by the workload and the nemesis) and remembers them:
// the candidates a read's bytes are traced to.
type Versions struct {
	mu   sync.Mutex // guards next
	next map[string]int
}

// Next returns a new version for a write of path.
func (vs *Versions) Next(path string) int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if vs.next == nil {
		vs.next = map[string]int{}
	}
	vs.next[path]++
	return vs.next[path]
}

// Written returns every version handed out for path so far.
func (vs *Versions) Written(path string) []int {
	vs.mu.Lock()
	n := vs.next[path]
	vs.mu.Unlock()
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// Node is a process the workload talks to.
type Node struct {
	// Name is the node in the history: fed-0, cache-1, door.
	Name string
	// URL is its HTTP base URL (no trailing slash); RootURL its root://
	// base ("root://host:port") for the door.
	URL, RootURL string
	// Writes: PUT and DELETE go here (a federator), not only reads.
	Writes bool
	// Buffered: the node sees the write buffer's pending files (the
	// buffer's own process), so buffered paths are read and written
	// here during the run.
	Buffered bool
}

// Workload is the clients' side of a run: the paths, the nodes, and how
// each operation is made and recorded.
type Workload struct {
	Nodes    []Node
	Paths    []Path
	History  *History
	Versions *Versions
	// T0 is the start of the run: op times are offsets from it.
	T0 time.Time
	// HTTP is the clients' HTTP client (redirects followed).
	HTTP *http.Client
	// Timeout bounds one operation (the xrdcp runs too).
	Timeout time.Duration
	// Xrdcp is the xrdcp binary; TmpDir holds its files.
	Xrdcp, TmpDir string
}

// Path is one path of the workload.
type Path struct {
	Name string
	// Once: written once only (then only read).
	Once bool
	// Buffered: under the write buffer's prefix.
	Buffered bool
}

// MakePaths returns n paths: a third written once, a third overwritten
// and deleted, a third of those under the buffered prefix.
func MakePaths(n int, bufPrefix string) []Path {
	var ps []Path
	for i := range n {
		switch i % 3 {
		case 0:
			ps = append(ps, Path{Name: fmt.Sprintf("/nem/once/d%d/f%03d", i%7, i), Once: true})
		case 1:
			ps = append(ps, Path{Name: fmt.Sprintf("/nem/over/d%d/f%03d", i%5, i)})
		default:
			ps = append(ps, Path{Name: fmt.Sprintf("%s/d%d/f%03d", bufPrefix, i%3, i), Buffered: true})
		}
	}
	return ps
}

func (w *Workload) now() int64 { return int64(time.Since(w.T0)) }

// content caches the bytes of versions, for decoding reads.
type content struct {
	mu sync.Mutex // guards m
	m  map[string][]byte
}

func (c *content) get(p string, v int) []byte {
	k := p + "\x00" + strconv.Itoa(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 4096 {
		c.m = map[string][]byte{}
	}
	b, ok := c.m[k]
	if !ok {
		b = Content(p, v)
		c.m[k] = b
	}
	return b
}

// Client runs one goroutine's operations until ctx ends.
func (w *Workload) Client(ctx context.Context, id int, rng *rand.Rand) {
	var cc content
	wrote := map[string]bool{} // once-paths this client saw written
	for ctx.Err() == nil {
		p := w.Paths[rng.IntN(len(w.Paths))]
		n := w.pick(rng, p)
		r := rng.IntN(100)
		write := !p.Once || !wrote[p.Name]
		var op Op
		switch {
		case n.RootURL != "" && (r < 50 || !write):
			op = w.XGet(ctx, id, n, p.Name, false, &cc)
		case n.RootURL != "":
			wrote[p.Name] = true
			op = w.XPut(ctx, id, n, p.Name)
		case n.Writes && r < 30 && write:
			wrote[p.Name] = true
			op = w.Put(ctx, id, n, p.Name)
		case n.Writes && r < 36 && !p.Once:
			op = w.Delete(ctx, id, n, p.Name)
		case r < 60:
			op = w.Get(ctx, id, n, p.Name, false, &cc)
		case r < 85:
			size := int64(MaxSize)
			if vs := w.Versions.Written(p.Name); len(vs) > 0 {
				size = Size(p.Name, vs[len(vs)-1])
			}
			op = w.Range(ctx, id, n, p.Name, rng.Int64N(size), 1+rng.Int64N(96<<10), &cc)
		default:
			op = w.Head(ctx, id, n, p.Name)
		}
		if ctx.Err() != nil && !op.OK && !op.Kind.IsWrite() {
			continue // cut short by the end of the run, not by the lake
		}
		w.History.Add(op)
	}
}

// FinalRead reads the whole of p through n after every fault healed,
// again while it fails, until deadline: every attempt is in the
// history, the last one marked final.
func (w *Workload) FinalRead(ctx context.Context, client int, n Node, p string, deadline time.Time) {
	var cc content
	for {
		var op Op
		if n.RootURL != "" {
			op = w.XGet(ctx, client, n, p, true, &cc)
		} else {
			op = w.Get(ctx, client, n, p, true, &cc)
		}
		if op.OK || time.Now().After(deadline) || ctx.Err() != nil {
			w.History.Add(op)
			return
		}
		op.Final = false
		w.History.Add(op)
		select { // a failing node is asked again after a pause, not in a loop
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// pick chooses the node for an operation on p: buffered paths go to the
// nodes that see the buffer.
func (w *Workload) pick(rng *rand.Rand, p Path) Node {
	for {
		n := w.Nodes[rng.IntN(len(w.Nodes))]
		if !p.Buffered || n.Buffered {
			return n
		}
	}
}

// Put writes a new version of p through n.
func (w *Workload) Put(ctx context.Context, client int, n Node, p string) Op {
	v := w.Versions.Next(p)
	body := Content(p, v)
	op := Op{Client: client, Node: n.Name, Kind: Put, Path: p, Version: v, Start: w.now()}
	status, _, reply, err := w.do(ctx, http.MethodPut, n.URL+p, body, nil)
	op.End = w.now()
	w.answer(&op, status, reply, err, false)
	return op
}

// Delete removes p through n.
func (w *Workload) Delete(ctx context.Context, client int, n Node, p string) Op {
	op := Op{Client: client, Node: n.Name, Kind: Delete, Path: p, Version: w.Versions.Next(p), Start: w.now()}
	status, _, reply, err := w.do(ctx, http.MethodDelete, n.URL+p, nil, nil)
	op.End = w.now()
	w.answer(&op, status, reply, err, true)
	return op
}

// Get reads the whole of p through n.
func (w *Workload) Get(ctx context.Context, client int, n Node, p string, final bool, cc *content) Op {
	op := Op{Client: client, Node: n.Name, Kind: Get, Path: p, Start: w.now(), Final: final}
	status, _, body, err := w.do(ctx, http.MethodGet, n.URL+p, nil, nil)
	op.End = w.now()
	if w.answer(&op, status, body, err, true) && !op.Absent {
		w.decode(&op, 0, body, cc, func(v int) bool { return int64(len(body)) == Size(p, v) })
	}
	return op
}

// Range reads bytes [off, off+n) of p through node.
func (w *Workload) Range(ctx context.Context, client int, node Node, p string, off, n int64, cc *content) Op {
	op := Op{Client: client, Node: node.Name, Kind: Range, Path: p, Off: off, Len: n, Start: w.now()}
	h := http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+n-1)}}
	status, hdr, body, err := w.do(ctx, http.MethodGet, node.URL+p, nil, h)
	op.End = w.now()
	if !w.answer(&op, status, body, err, true) || op.Absent {
		return op
	}
	switch status {
	case http.StatusRequestedRangeNotSatisfiable:
		// The file is shorter than off: any version that short.
		for _, v := range w.Versions.Written(p) {
			if Size(p, v) <= off {
				op.Versions = append(op.Versions, v)
			}
		}
		op.Unknown = len(op.Versions) == 0
	case http.StatusPartialContent:
		if !strings.HasPrefix(hdr.Get("Content-Range"), fmt.Sprintf("bytes %d-", off)) {
			op.Unknown = true
			op.Err = "Content-Range " + hdr.Get("Content-Range")
			break
		}
		w.decode(&op, off, body, cc, func(v int) bool { return int64(len(body)) == min(n, Size(p, v)-off) })
	default: // 200: the whole file
		w.decode(&op, 0, body, cc, func(v int) bool { return int64(len(body)) == Size(p, v) })
	}
	return op
}

// Head asks p's size through n.
func (w *Workload) Head(ctx context.Context, client int, n Node, p string) Op {
	op := Op{Client: client, Node: n.Name, Kind: Head, Path: p, Start: w.now()}
	status, hdr, _, err := w.do(ctx, http.MethodHead, n.URL+p, nil, nil)
	op.End = w.now()
	if w.answer(&op, status, nil, err, true) && !op.Absent {
		op.Size, _ = strconv.ParseInt(hdr.Get("Content-Length"), 10, 64)
		op.Versions = SizeVersions(p, op.Size, w.Versions.Written(p))
		op.Unknown = len(op.Versions) == 0
	}
	return op
}

// decode traces a read's bytes; fits says which versions the length of
// the answer fits (a whole file, or a range of it).
func (w *Workload) decode(op *Op, off int64, body []byte, cc *content, fits func(int) bool) {
	sum := sha256.Sum256(body)
	op.Size, op.Digest = int64(len(body)), hex.EncodeToString(sum[:8])
	d := Decode(op.Path, off, body, w.Versions.Written(op.Path), cc.get)
	op.Mixed, op.Unknown = d.Mixed, d.Unknown
	for _, v := range d.Versions {
		if d.Mixed || fits(v) {
			op.Versions = append(op.Versions, v)
		}
	}
	if !d.Mixed && !d.Unknown && len(op.Versions) == 0 {
		op.Unknown, op.Versions = true, d.Versions // a version's bytes, cut short
		op.Err = fmt.Sprintf("%d bytes: versions %v cut short", len(body), d.Versions)
	}
}

// answer classifies an HTTP answer into op and reports whether it is one
// to look at (2xx, 416, or a 404 when notFoundOK). An error status keeps
// the start of its body (the server's reason) in op.Err.
func (w *Workload) answer(op *Op, status int, body []byte, err error, notFoundOK bool) bool {
	op.Status = status
	switch {
	case err != nil:
		op.Err, op.ErrKind = err.Error(), errKind(err)
		return false
	case status == http.StatusNotFound && notFoundOK:
		op.OK, op.Absent = true, true
		return true
	case status/100 == 2 || status == http.StatusRequestedRangeNotSatisfiable:
		op.OK = true
		return true
	default:
		op.ErrKind = strconv.Itoa(status)
		op.Err = strings.TrimSpace(string(body[:min(len(body), 300)]))
		return false
	}
}

// errKind names a failed exchange: it could not connect (the node is
// down, stopped past the dial timeout or cut off), it broke once
// answering, it ran out of time, or the run's end cut it.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "cut"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return "conn"
	default:
		return "broken"
	}
}

// do makes one request and reads its whole answer.
func (w *Workload) do(ctx context.Context, method, u string, body []byte, h http.Header) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := w.HTTP.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// XPut writes a new version of p with xrdcp through the door n.
func (w *Workload) XPut(ctx context.Context, client int, n Node, p string) Op {
	v := w.Versions.Next(p)
	src := filepath.Join(w.TmpDir, fmt.Sprintf("put-%d", client))
	op := Op{Client: client, Node: n.Name, Kind: XPut, Path: p, Version: v}
	if err := os.WriteFile(src, Content(p, v), 0o644); err != nil {
		op.Err, op.ErrKind = err.Error(), "runner"
		return op
	}
	op.Start = w.now()
	_, out, err := w.xrdcp(ctx, src, n.RootURL+"/"+p)
	op.End = w.now()
	w.doorAnswer(&op, out, err, false)
	return op
}

// XGet reads the whole of p with xrdcp through the door n (to its
// standard output).
func (w *Workload) XGet(ctx context.Context, client int, n Node, p string, final bool, cc *content) Op {
	op := Op{Client: client, Node: n.Name, Kind: XGet, Path: p, Start: w.now(), Final: final}
	body, out, err := w.xrdcp(ctx, n.RootURL+"/"+p, "-")
	op.End = w.now()
	if w.doorAnswer(&op, out, err, true) && !op.Absent {
		w.decode(&op, 0, body, cc, func(v int) bool { return int64(len(body)) == Size(p, v) })
	}
	return op
}

// xrdcp runs one copy, bounded by the workload's timeout (the client's
// own timeouts a little below it), and returns what it wrote to its
// standard output and its messages.
func (w *Workload) xrdcp(ctx context.Context, src, dst string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.Xrdcp, "-f", "-s", "-N", src, dst)
	secs := strconv.Itoa(int(w.Timeout.Seconds() * 2 / 3))
	cmd.Env = append(os.Environ(), "XRD_REQUESTTIMEOUT="+secs, "XRD_STREAMTIMEOUT="+secs,
		"XRD_CONNECTIONRETRY=1", "XRD_TIMEOUTRESOLUTION=1")
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil && err != nil {
		return nil, stderr.String(), ctx.Err()
	}
	return stdout.Bytes(), stderr.String(), err
}

// doorAnswer classifies an xrdcp run: done, not found (a read's
// absent), or a failure the door gave (kXR_wait past the client's
// patience, kXR_ServerError, a broken connection).
func (w *Workload) doorAnswer(op *Op, out string, err error, read bool) bool {
	switch {
	case err == nil:
		op.OK = true
		return true
	case errors.Is(err, context.Canceled):
		op.Err, op.ErrKind = "the run ended", "cut"
	case errors.Is(err, context.DeadlineExceeded):
		op.Err, op.ErrKind = "xrdcp ran out of time: "+lastLine(out), "timeout"
	case read && (strings.Contains(out, "[3011]") || strings.Contains(out, "No such file")):
		op.OK, op.Absent = true, true
		return true
	default:
		op.Err, op.ErrKind = lastLine(out), "door"
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
