package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
	"go-hep.org/x/hep/xrootd/xrdproto"
)

// fakeNS is an in-memory Namespace: files by path (directories are
// implied by them), replicas by path, and a switch that makes every
// call fail as unavailable.
type fakeNS struct {
	mu       sync.Mutex
	files    map[string][]byte
	replicas map[string][]*url.URL
	down     atomic.Bool
	opens    atomic.Int64          // Open calls
	putFail  atomic.Pointer[error] // Put fails with this when set
}

func newFakeNS() *fakeNS {
	return &fakeNS{files: map[string][]byte{}, replicas: map[string][]*url.URL{}}
}

func (n *fakeNS) set(p string, b []byte) {
	n.mu.Lock()
	n.files[p] = b
	n.mu.Unlock()
}

func (n *fakeNS) get(p string) ([]byte, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b, ok := n.files[p]
	return b, ok
}

var errOutage = fmt.Errorf("fake: %w: every endpoint is down", endpoint.ErrUnavailable)

var mtime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (n *fakeNS) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	if n.down.Load() {
		return endpoint.Info{}, errOutage
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if b, ok := n.files[p]; ok {
		return endpoint.Info{Name: path.Base(p), Size: int64(len(b)), ModTime: mtime}, nil
	}
	pre := strings.TrimSuffix(p, "/") + "/"
	for f := range n.files {
		if strings.HasPrefix(f, pre) {
			return endpoint.Info{Name: path.Base(p), IsDir: true, ModTime: mtime}, nil
		}
	}
	return endpoint.Info{}, fmt.Errorf("fake: stat %q: %w", p, endpoint.ErrNotFound)
}

func (n *fakeNS) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	info, err := n.Stat(ctx, dir)
	if err != nil {
		return nil, err
	}
	if !info.IsDir {
		return nil, fmt.Errorf("fake: list %q: %w", dir, endpoint.ErrRefused)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	pre := strings.TrimSuffix(dir, "/") + "/"
	seen := map[string]endpoint.Info{}
	for f, b := range n.files {
		rest, ok := strings.CutPrefix(f, pre)
		if !ok {
			continue
		}
		name, _, sub := strings.Cut(rest, "/")
		if sub {
			seen[name] = endpoint.Info{Name: name, IsDir: true, ModTime: mtime}
		} else {
			seen[name] = endpoint.Info{Name: name, Size: int64(len(b)), ModTime: mtime}
		}
	}
	var out []endpoint.Info
	for _, i := range seen {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

func (n *fakeNS) Open(ctx context.Context, p string, off, l int64) (io.ReadCloser, error) {
	n.opens.Add(1)
	if n.down.Load() {
		return nil, errOutage
	}
	b, ok := n.get(p)
	if !ok {
		return nil, fmt.Errorf("fake: open %q: %w", p, endpoint.ErrNotFound)
	}
	if off > int64(len(b)) {
		return nil, fmt.Errorf("fake: open %q: offset past the end: %w", p, endpoint.ErrRefused)
	}
	whole := int64(len(b))
	b = b[off:]
	if l >= 0 && l < int64(len(b)) {
		b = b[:l]
	}
	return versioned{ReadCloser: io.NopCloser(bytes.NewReader(b)), ver: endpoint.Info{Size: whole, ModTime: mtime}}, nil
}

// versioned is a reader that says which version of its file it reads,
// as the federation's and the cache's readers do (endpoint.Versioned).
type versioned struct {
	io.ReadCloser
	ver endpoint.Info
}

func (v versioned) Version() endpoint.Info { return v.ver }

// A handle reads the version its open saw: a file replaced since is an
// error for a read that must reopen it, never its new bytes.
func TestReadAfterReplaceIsRefused(t *testing.T) {
	ns := newFakeNS()
	ns.set("/f", bytes.Repeat([]byte("a"), 1000))
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/f", 0)
	read := func(off int64) (int, []byte) {
		params := make([]byte, 16)
		binary.BigEndian.PutUint32(params, fh)
		binary.BigEndian.PutUint64(params[4:], uint64(off))
		binary.BigEndian.PutUint32(params[12:], 10)
		return r.answer(r.request(3013, params, nil)) // kXR_read
	}
	if st, body := read(0); st != 0 || string(body) != "aaaaaaaaaa" {
		t.Fatalf("first read: %d %q", st, body)
	}
	ns.set("/f", bytes.Repeat([]byte("b"), 2000)) // replaced, another size
	if st, body := read(500); st == 0 {
		t.Errorf("read after the file was replaced = ok %q; want an error, not the new bytes", body)
	}
}

func (n *fakeNS) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	if n.down.Load() {
		return errOutage
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("fake: put %q: %d bytes, want %d", p, len(b), size)
	}
	if e := n.putFail.Load(); e != nil {
		return *e
	}
	n.set(p, b)
	return nil
}

func (n *fakeNS) Checksum(ctx context.Context, p, algo string) (string, error) {
	if n.down.Load() {
		return "", errOutage
	}
	if algo != "adler32" {
		return "", fmt.Errorf("fake: %s: %w", algo, endpoint.ErrUnsupported)
	}
	b, ok := n.get(p)
	if !ok {
		return "", fmt.Errorf("fake: checksum %q: %w", p, endpoint.ErrNotFound)
	}
	return fmt.Sprintf("%08x", adler32.Checksum(b)), nil
}

func (n *fakeNS) Replicas(ctx context.Context, p string) ([]*url.URL, error) {
	if n.down.Load() {
		return nil, errOutage
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replicas[p], nil
}

// startDoor serves ns on 127.0.0.1 and returns the door and its address.
func startDoor(t testing.TB, ns Namespace, opts Options) (*Server, string) {
	t.Helper()
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	s := New(ns, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve after Close = %v, want nil", err)
		}
	})
	return s, ln.Addr().String()
}

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// rawClient speaks the protocol by hand, for what real clients hide.
type rawClient struct {
	t   testing.TB
	c   net.Conn
	sid uint16
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := xrdwire.Dial(context.Background(), addr, "test", 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawClient{t: t, c: c, sid: 1}
}

// request writes a request and returns its stream id.
func (r *rawClient) request(id uint16, params []byte, data []byte) [2]byte {
	r.t.Helper()
	r.sid++
	var h header
	binary.BigEndian.PutUint16(h[0:], r.sid)
	binary.BigEndian.PutUint16(h[2:], id)
	copy(h[4:20], params)
	binary.BigEndian.PutUint32(h[20:], uint32(len(data)))
	if _, err := r.c.Write(append(h[:], data...)); err != nil {
		r.t.Fatalf("write request: %v", err)
	}
	return [2]byte{byte(r.sid >> 8), byte(r.sid)}
}

// frame reads one response frame (a kXR_status frame whole: its body
// and data).
func (r *rawClient) frame() ([2]byte, int, []byte) {
	r.t.Helper()
	var h [8]byte
	if _, err := io.ReadFull(r.c, h[:]); err != nil {
		r.t.Fatalf("read response: %v", err)
	}
	n := binary.BigEndian.Uint32(h[4:])
	body := make([]byte, n)
	if _, err := io.ReadFull(r.c, body); err != nil {
		r.t.Fatalf("read response body: %v", err)
	}
	st := int(binary.BigEndian.Uint16(h[2:]))
	if st == statusStatus {
		data := make([]byte, binary.BigEndian.Uint32(body[12:]))
		if _, err := io.ReadFull(r.c, data); err != nil {
			r.t.Fatalf("read status data: %v", err)
		}
		body = append(body, data...)
	}
	return [2]byte{h[0], h[1]}, st, body
}

// answer reads frames until the final one for sid, gathering kXR_oksofar
// parts.
func (r *rawClient) answer(sid [2]byte) (int, []byte) {
	r.t.Helper()
	var acc []byte
	for {
		fs, st, body := r.frame()
		if fs != sid {
			r.t.Fatalf("response for stream %v, want %v", fs, sid)
		}
		if st == int(4000) {
			acc = append(acc, body...)
			continue
		}
		return st, append(acc, body...)
	}
}

func pathParams() []byte { return make([]byte, 16) }

func (r *rawClient) open(p string, opts uint16) uint32 {
	r.t.Helper()
	params := make([]byte, 16)
	binary.BigEndian.PutUint16(params[2:], opts)
	st, body := r.answer(r.request(3010, params, []byte(p)))
	if st != 0 {
		r.t.Fatalf("open %s: status %d %q", p, st, body)
	}
	return binary.BigEndian.Uint32(body)
}

func TestMissingIsNotFoundAtOnce(t *testing.T) {
	ns := newFakeNS()
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	for _, id := range []uint16{3017, 3010} { // stat, open
		start := time.Now()
		st, body := r.answer(r.request(id, pathParams(), []byte("/store/missing.root?xrd.wantprot=unix")))
		took := time.Since(start)
		if st != 4003 {
			t.Fatalf("request %d of a missing file: status %d, want kXR_error", id, st)
		}
		if se := xrdwire.ParseError(body); se.Code != 3011 {
			t.Errorf("request %d of a missing file: error %d %q, want kXR_NotFound", id, se.Code, se.Message)
		}
		if took > 50*time.Millisecond {
			t.Errorf("request %d: kXR_NotFound took %v, want <= 50ms", id, took)
		}
	}
}

// fakeClock is a clock the test moves (Options.now).
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestOutageIsWaitThenServerError: during an outage a request gets
// kXR_wait of a fifth of OutageWait (at least 1 s), shorter near the end,
// until OutageWait has passed since the first, then kXR_ServerError, never
// kXR_NotFound; the next request starts a new bound, and once the
// namespace is back the request is answered.
func TestOutageIsWaitThenServerError(t *testing.T) {
	ns := newFakeNS()
	ns.set("/a/f", []byte("x"))
	ns.down.Store(true)
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	s, addr := startDoor(t, ns, Options{OutageWait: 10 * time.Second, now: clock.now})
	r := dialRaw(t, addr)
	stat := func() (int, []byte) { return r.answer(r.request(3017, pathParams(), []byte("/a/f"))) }
	// 0 s: 2 s (a fifth); 2 s: 2 s; 8.5 s: 1 s (1.5 s left); 9.5 s: 0.5 s left, no wait.
	for i, c := range []struct {
		after time.Duration
		secs  uint32 // 0: kXR_ServerError
	}{{0, 2}, {2 * time.Second, 2}, {6500 * time.Millisecond, 1}, {time.Second, 0}, {0, 2}} {
		clock.advance(c.after)
		st, body := stat()
		switch {
		case c.secs > 0 && st != 4005:
			t.Fatalf("stat #%d during an outage: status %d %q, want kXR_wait", i, st, body)
		case c.secs > 0:
			if secs := binary.BigEndian.Uint32(body); secs != c.secs {
				t.Errorf("stat #%d: kXR_wait for %d s, want %d", i, secs, c.secs)
			}
		case st != 4003:
			t.Fatalf("stat #%d: status %d, want kXR_error once OutageWait has passed", i, st)
		default:
			if se := xrdwire.ParseError(body); se.Code != 3012 {
				t.Errorf("stat #%d: error %d %q, want kXR_ServerError (never kXR_NotFound)", i, se.Code, se.Message)
			}
		}
	}
	if got := s.Stats().Errors[classNotFound]; got != 0 {
		t.Errorf("notfound errors = %d during an outage, want 0", got)
	}
	if got := s.Stats().Errors[classUnavailable]; got != 5 {
		t.Errorf("unavailable errors = %d, want 5", got)
	}
	// The namespace is back: the same request is answered.
	ns.down.Store(false)
	if st, body := stat(); st != 0 {
		t.Errorf("stat after the outage: status %d %q, want kXR_ok", st, body)
	}
	// A bound under a second: kXR_ServerError at once.
	ns.down.Store(true)
	_, addr2 := startDoor(t, ns, Options{OutageWait: time.Millisecond})
	r2 := dialRaw(t, addr2)
	if st, body := r2.answer(r2.request(3017, pathParams(), []byte("/a/f"))); st != 4003 || xrdwire.ParseError(body).Code != 3012 {
		t.Errorf("stat with OutageWait 1ms: status %d %q, want kXR_ServerError at once", st, body)
	}
}

func TestUnsupportedRequest(t *testing.T) {
	_, addr := startDoor(t, newFakeNS(), Options{})
	r := dialRaw(t, addr)
	for _, id := range []uint16{3008, 3014, 4242} { // mkdir, rm, unknown
		st, body := r.answer(r.request(id, pathParams(), []byte("/x")))
		se := xrdwire.ParseError(body)
		if st != 4003 || se.Code != 3013 || !strings.Contains(se.Message, "not supported") {
			t.Errorf("request %d: status %d, error %d %q; want kXR_Unsupported", id, st, se.Code, se.Message)
		}
	}
	// The connection still works.
	if st, _ := r.answer(r.request(3011, nil, nil)); st != 0 {
		t.Errorf("ping after unsupported requests: status %d", st)
	}
}

func TestPathEscapeRefused(t *testing.T) {
	ns := newFakeNS()
	ns.set("/secret", []byte("s"))
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	st, body := r.answer(r.request(3017, pathParams(), []byte("/a/../secret")))
	if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3000 {
		t.Errorf("stat /a/../secret: status %d error %d %q, want kXR_ArgInvalid", st, se.Code, se.Message)
	}
}

func TestReadVAndPgRead(t *testing.T) {
	ns := newFakeNS()
	data := payload(3*readVBuf+777, 1)
	ns.set("/d/f", data)
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/d/f?foo=bar", 0x10)

	// readv: items larger together than one 2 MiB part.
	type item struct{ off, n int }
	items := []item{{0, 10}, {5000, 1 << 20}, {len(data) - 5, 5}, {100, 1500 << 10}, {len(data) - 3, 10}}
	var list []byte
	for _, it := range items {
		list = binary.BigEndian.AppendUint32(list, fh)
		list = binary.BigEndian.AppendUint32(list, uint32(it.n))
		list = binary.BigEndian.AppendUint64(list, uint64(it.off))
	}
	st, body := r.answer(r.request(3025, nil, list))
	if st != 0 {
		t.Fatalf("readv: status %d %q", st, body)
	}
	for i, it := range items {
		if len(body) < 16 {
			t.Fatalf("readv item %d: answer ends", i)
		}
		n := int(binary.BigEndian.Uint32(body[4:]))
		off := int(binary.BigEndian.Uint64(body[8:]))
		want := data[it.off:min(it.off+it.n, len(data))]
		if off != it.off || !bytes.Equal(body[16:16+n], want) {
			t.Fatalf("readv item %d: %d bytes at %d, want %d at %d (or bytes differ)", i, n, off, len(want), it.off)
		}
		body = body[16+n:]
	}

	// pgread, unaligned, across parts and past the end.
	off, n := 1000, len(data)
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, fh)
	binary.BigEndian.PutUint64(params[4:], uint64(off))
	binary.BigEndian.PutUint32(params[12:], uint32(n))
	sid := r.request(reqPgRead, params, nil)
	var got []byte
	for {
		fs, st, body := r.frame()
		if fs != sid || st != statusStatus {
			t.Fatalf("pgread: frame for %v status %d, want %v kXR_status", fs, st, sid)
		}
		if crc := crc32.Checksum(body[4:24], castagnoli); crc != binary.BigEndian.Uint32(body) {
			t.Fatalf("pgread: status body CRC %08x, want %08x", binary.BigEndian.Uint32(body), crc)
		}
		if body[6] != byte(reqPgRead-reqFirst) {
			t.Errorf("pgread: requestid %d", body[6])
		}
		partOff := int64(binary.BigEndian.Uint64(body[16:]))
		if partOff != int64(off+len(got)) {
			t.Fatalf("pgread part at %d, want %d", partOff, off+len(got))
		}
		pg := body[24:]
		first := pageSize - int(partOff%pageSize)
		for len(pg) > 0 {
			l := min(first, len(pg)-4)
			first = pageSize
			if crc32.Checksum(pg[4:4+l], castagnoli) != binary.BigEndian.Uint32(pg) {
				t.Fatalf("pgread: page CRC wrong at %d", off+len(got))
			}
			got = append(got, pg[4:4+l]...)
			pg = pg[4+l:]
		}
		if body[7] == finalResult {
			break
		}
	}
	if !bytes.Equal(got, data[off:]) {
		t.Errorf("pgread: %d bytes, want %d (or bytes differ)", len(got), len(data)-off)
	}
}

func TestSequentialReadsKeepTheReader(t *testing.T) {
	ns := newFakeNS()
	data := payload(8<<20, 2)
	ns.set("/f", data)
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/f", 0x10)
	var got []byte
	for off := 0; off < len(data); off += 1 << 20 {
		params := make([]byte, 16)
		binary.BigEndian.PutUint32(params, fh)
		binary.BigEndian.PutUint64(params[4:], uint64(off))
		binary.BigEndian.PutUint32(params[12:], 1<<20)
		st, body := r.answer(r.request(3013, params, nil))
		if st != 0 {
			t.Fatalf("read at %d: status %d", off, st)
		}
		got = append(got, body...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential reads: bytes differ")
	}
	// The first read opens its range, the second (sequential) opens to
	// the end and every later one continues it.
	if n := ns.opens.Load(); n != 2 {
		t.Errorf("namespace opens for 8 sequential reads = %d, want 2", n)
	}
}

func TestUploadFailureLeavesNothing(t *testing.T) {
	ns := newFakeNS()
	refused := fmt.Errorf("fake: %w: endpoint refused the write", endpoint.ErrRefused)
	ns.putFail.Store(&refused)
	door, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/up/f", 0x0008|0x0020) // kXR_new | kXR_open_updt
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, fh)
	if st, body := r.answer(r.request(3019, params, []byte("hello"))); st != 0 {
		t.Fatalf("write: status %d %q", st, body)
	}
	st, body := r.answer(r.request(3003, params, nil))
	if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3010 || !strings.Contains(se.Message, "refused the write") {
		t.Errorf("close after a refused Put: status %d error %d %q, want kXR_NotAuthorized with the Put's error", st, se.Code, se.Message)
	}
	if _, ok := ns.get("/up/f"); ok {
		t.Error("a failed upload is visible")
	}

	// A connection that drops mid-upload stores nothing either.
	ns.putFail.Store(nil)
	r2 := dialRaw(t, addr)
	fh = r2.open("/up/g", 0x0008|0x0020)
	binary.BigEndian.PutUint32(params, fh)
	if st, _ := r2.answer(r2.request(3019, params, []byte("partial"))); st != 0 {
		t.Fatal("write failed")
	}
	open := door.Stats().Connections
	r2.c.Close()
	// The door drops the upload before it counts the connection closed.
	testenv.Eventually(t, 5*time.Second, "the door saw the connection drop", func() bool { return door.Stats().Connections < open })
	if _, ok := ns.get("/up/g"); ok {
		t.Error("an aborted upload is visible")
	}
}

func TestPgWriteBadCRCFailsUpload(t *testing.T) {
	ns := newFakeNS()
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/pg", 0x0008|0x0020)
	data := payload(10000, 3)
	unit := pages(nil, data, 0)
	params := make([]byte, 16)
	binary.BigEndian.PutUint32(params, fh)
	sid := r.request(reqPgWrite, params, unit)
	if fs, st, _ := r.frame(); fs != sid || st != statusStatus {
		t.Fatalf("pgwrite: status %d, want kXR_status", st)
	}
	unit[5] ^= 0xff // corrupt the first page
	binary.BigEndian.PutUint64(params[4:], 10000)
	st, body := r.answer(r.request(reqPgWrite, params, unit))
	if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3019 {
		t.Fatalf("pgwrite with a bad CRC: status %d error %d, want kXR_ChkSumErr", st, se.Code)
	}
	if st, _ := r.answer(r.request(3003, params, nil)); st != 4003 {
		t.Errorf("close of a corrupted upload: status %d, want kXR_error", st)
	}
	if _, ok := ns.get("/pg"); ok {
		t.Error("a corrupted upload is visible")
	}
}

func TestHugeDlenClosesConnection(t *testing.T) {
	_, addr := startDoor(t, newFakeNS(), Options{})
	r := dialRaw(t, addr)
	var h header
	binary.BigEndian.PutUint16(h[2:], 3017)
	binary.BigEndian.PutUint32(h[20:], 0x7fffffff)
	if _, err := r.c.Write(h[:]); err != nil {
		t.Fatal(err)
	}
	_, st, body := r.frame()
	if se := xrdwire.ParseError(body); st != 4003 || se.Code != 3002 {
		t.Errorf("huge dlen: status %d error %d, want kXR_ArgTooLong", st, se.Code)
	}
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("after a huge dlen the connection gives %v, want EOF", err)
	}
}

// pages lays data (test helper), read from file offset off, out as pgread sends it:
// each page's CRC32C before the page, pages aligned on file offsets (the
// first may be short). It appends to dst and returns it.
func pages(dst, data []byte, off int64) []byte {
	first := pageSize - int(off%pageSize)
	for len(data) > 0 {
		n := min(first, len(data))
		first = pageSize
		dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(data[:n], castagnoli))
		dst = append(dst, data[:n]...)
		data = data[n:]
	}
	return dst
}

// TestPipelinedRequests sends many requests on one connection without
// waiting: answers come back by stream id, reads of each file in the
// order sent, so each file's sequential reads share one reader.
func TestPipelinedRequests(t *testing.T) {
	ns := newFakeNS()
	const files, reads, size = 3, 10, 256 << 10
	data := map[uint32][]byte{}
	_, addr := startDoor(t, ns, Options{MaxInFlight: 4})
	r := dialRaw(t, addr)
	for i := range files {
		p := fmt.Sprintf("/p/%d", i)
		ns.set(p, payload(reads*size, uint64(100+i)))
		fh := r.open(p, 0x10)
		data[fh], _ = ns.get(p)
	}
	type want struct {
		fh  uint32
		off int
	}
	sent := map[[2]byte]want{}
	for k := range reads {
		for fh := range data {
			sent[r.request(3013, fhParams(fh, int64(k*size), size), nil)] = want{fh, k * size}
		}
		sent[r.request(3017, nil, []byte("/p/0"))] = want{}
	}
	got := map[[2]byte][]byte{}
	for len(sent) > 0 {
		sid, st, body := r.frame()
		w, ok := sent[sid]
		if !ok {
			t.Fatalf("answer for unknown stream %v", sid)
		}
		got[sid] = append(got[sid], body...)
		if st == 4000 {
			continue
		}
		if st != 0 {
			t.Fatalf("request %+v: status %d %q", w, st, body)
		}
		if w.fh != 0 && !bytes.Equal(got[sid], data[w.fh][w.off:w.off+size]) {
			t.Errorf("read of handle %d at %d: bytes differ", w.fh, w.off)
		}
		delete(sent, sid)
	}
	if n := ns.opens.Load(); n != 2*files {
		t.Errorf("namespace opens = %d for %d files read sequentially, want %d", n, files, 2*files)
	}
}

// idNS records the request ID each Stat's context carries.
type idNS struct {
	*fakeNS
	mu  sync.Mutex
	ids []string
}

func (n *idNS) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	n.mu.Lock()
	n.ids = append(n.ids, httpx.RequestID(ctx))
	n.mu.Unlock()
	return n.fakeNS.Stat(ctx, p)
}

// TestRequestsCarryAnID: each request the door asks its namespace about
// carries a request ID of its own, as an HTTP request does, so that the
// log lines it causes, and the HTTP endpoints it reaches (X-Request-Id),
// can be told apart and followed.
func TestRequestsCarryAnID(t *testing.T) {
	ns := &idNS{fakeNS: newFakeNS()}
	ns.set("/f", []byte("x"))
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	for range 2 {
		sid := r.request(xrdwire.ReqStat, nil, []byte("/f"))
		if st, body := r.answer(sid); st != int(xrdproto.Ok) {
			t.Fatalf("kXR_stat = %d %q", st, body)
		}
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if len(ns.ids) != 2 || !httpx.ValidRequestID(ns.ids[0]) || !httpx.ValidRequestID(ns.ids[1]) || ns.ids[0] == ns.ids[1] {
		t.Errorf("request IDs seen by the namespace = %q, want two different valid ones", ns.ids)
	}
}
