package xroot

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go-hep.org/x/hep/xrootd"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
)

// TestOpenPaths reads ranges of one file from a real xrootd on each read
// path: direct with the default request length, direct with requests
// small enough that a range spans many of them, and through go-hep.
func TestOpenPaths(t *testing.T) {
	x := startXRootD(t)
	data := randomData(5<<20+33, 3)
	x.seed(t, "f.bin", data)
	for _, path := range []struct {
		name   string
		chunk  int64
		goHEP  bool
		direct bool
	}{
		{"direct", directChunk, false, true},
		{"direct small requests", 300_001, false, true},
		{"go-hep", directChunk, true, false},
	} {
		t.Run(path.name, func(t *testing.T) {
			e := x.endpoint(t)
			e.readChunk = path.chunk
			e.noDirect.Store(path.goHEP)
			for _, tc := range []struct {
				name   string
				off, n int64
			}{
				{"whole", 0, -1},
				{"head", 0, 100},
				{"middle", 1_000_003, 2 << 20},
				{"tail", int64(len(data)) - 5, -1},
				{"past the end", int64(len(data)) - 10, 20},
				{"empty at end", int64(len(data)), -1},
				{"zero length", 10, 0},
			} {
				rc, err := e.Open(context.Background(), "/f.bin", tc.off, tc.n)
				if err != nil {
					t.Fatalf("Open(%d, %d): %v", tc.off, tc.n, err)
				}
				if _, isDirect := rc.(*directReader); isDirect != path.direct {
					t.Errorf("Open(%d, %d) gave a %T, want direct=%v", tc.off, tc.n, rc, path.direct)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				end := int64(len(data))
				if tc.n >= 0 {
					end = min(tc.off+tc.n, end)
				}
				if err != nil || !bytes.Equal(got, data[tc.off:end]) {
					t.Errorf("Open(%d, %d) gave %d bytes, %v; want %d equal", tc.off, tc.n, len(got), err, end-tc.off)
				}
			}
			if _, err := e.Open(context.Background(), "/none", 0, -1); !errors.Is(err, endpoint.ErrNotFound) {
				t.Errorf("Open(missing) = %v, want ErrNotFound", err)
			}
			if _, err := e.Open(context.Background(), "/", 0, -1); !errors.Is(err, endpoint.ErrRefused) {
				t.Errorf("Open(dir) = %v, want ErrRefused", err)
			}
		})
	}
}

// rawFake is a hand-written XRootD server that serves one file ("/f")
// and misbehaves on kXR_read as its mode says.
type rawFake struct {
	data     []byte
	mode     string // "ooo", "die", "stall", "ioerror", "shrink", "redirect" (opens and stats), "wait" (the first open)
	redirect string // host:port for "redirect"
	// dirlist, when set, answers kXR_dirlist (list_test.go); an error
	// hangs up.
	dirlist func(c net.Conn, sid [2]byte) error
	// lbal: the handshake says load balancer (kXR_LBalServer), as a
	// redirector or a lakefed door does, not data server.
	lbal    bool
	release chan struct{}
	reads   chan struct{} // one per kXR_read answered or begun

	mu     sync.Mutex // guards conns and waited
	conns  []net.Conn
	waited bool
	closes atomic.Int32 // kXR_close requests answered
}

func startRawFake(t *testing.T, f *rawFake) string {
	t.Helper()
	f.release = make(chan struct{})
	f.reads = make(chan struct{}, 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			f.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); f.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		close(f.release)
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func answer(w io.Writer, sid [2]byte, st int, body []byte) error {
	h := make([]byte, 8, 8+len(body))
	copy(h, sid[:])
	binary.BigEndian.PutUint16(h[2:], uint16(st))
	binary.BigEndian.PutUint32(h[4:], uint32(len(body)))
	_, err := w.Write(append(h, body...))
	return err
}

// serve speaks just enough of the protocol for go-hep's and our login,
// kXR_open of "/f" and kXR_read.
func (f *rawFake) serve(c net.Conn) {
	defer c.Close()
	hs := make([]byte, 20)
	if _, err := io.ReadFull(c, hs); err != nil {
		return
	}
	hsAnswer := []byte{0, 0, 5, 0x20, 0, 0, 0, 1}
	if f.lbal {
		hsAnswer[7] = 0
	}
	if answer(c, [2]byte{}, xrdwire.StatusOK, hsAnswer) != nil {
		return
	}
	type readReq struct {
		sid    [2]byte
		off, n int64
	}
	var held *readReq
	send := func(q readReq) error {
		f.reads <- struct{}{}
		end := min(q.off+q.n, int64(len(f.data)))
		b := f.data[q.off:end]
		switch f.mode {
		case "ioerror":
			return answer(c, q.sid, xrdwire.StatusError, append(binary.BigEndian.AppendUint32(nil, codeIOError), "disk on fire\x00"...))
		case "shrink":
			return answer(c, q.sid, xrdwire.StatusOK, b[:len(b)/2])
		case "die", "stall":
			h := make([]byte, 8)
			copy(h, q.sid[:])
			binary.BigEndian.PutUint32(h[4:], uint32(len(b)))
			if _, err := c.Write(append(h, b[:len(b)/2]...)); err != nil {
				return err
			}
			if f.mode == "stall" {
				<-f.release
			}
			return errors.New("gone")
		}
		// Two frames: kXR_oksofar with the first half, kXR_ok with the rest.
		if err := answer(c, q.sid, xrdwire.StatusOKSoFar, b[:len(b)/2]); err != nil {
			return err
		}
		return answer(c, q.sid, xrdwire.StatusOK, b[len(b)/2:])
	}
	for {
		h := make([]byte, 24)
		if _, err := io.ReadFull(c, h); err != nil {
			return
		}
		sid := [2]byte{h[0], h[1]}
		payload := make([]byte, binary.BigEndian.Uint32(h[20:]))
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		var err error
		switch binary.BigEndian.Uint16(h[2:]) {
		case 3006: // kXR_protocol
			err = answer(c, sid, xrdwire.StatusOK, []byte{0, 0, 5, 0x20, 0, 0, 0, 1})
		case xrdwire.ReqLogin:
			err = answer(c, sid, xrdwire.StatusOK, make([]byte, 16))
		case 3024: // kXR_bind: go-hep then reads on the main connection
			err = answer(c, sid, xrdwire.StatusError, append(binary.BigEndian.AppendUint32(nil, codeUnsupported), "no bind\x00"...))
		case xrdwire.ReqOpen:
			f.mu.Lock()
			wait := f.mode == "wait" && !f.waited
			f.waited = f.waited || wait
			f.mu.Unlock()
			switch {
			case wait:
				err = answer(c, sid, xrdwire.StatusWait, []byte{0, 0, 0, 0})
			case f.mode == "redirect":
				host, port, _ := net.SplitHostPort(f.redirect)
				p, _ := strconv.Atoi(port)
				err = answer(c, sid, xrdwire.StatusRedirect, append(binary.BigEndian.AppendUint32(nil, uint32(p)), host...))
			case string(payload) != "/f":
				err = answer(c, sid, xrdwire.StatusError, append(binary.BigEndian.AppendUint32(nil, codeNotFound), "no such file\x00"...))
			default:
				body := append(make([]byte, 12), fmt.Sprintf("1 %d 0 1700000000\x00", len(f.data))...)
				err = answer(c, sid, xrdwire.StatusOK, body)
			}
		case xrdwire.ReqRead:
			q := readReq{sid: sid, off: int64(binary.BigEndian.Uint64(h[8:])), n: int64(binary.BigEndian.Uint32(h[16:]))}
			switch {
			case f.mode != "ooo":
				err = send(q)
			case held != nil:
				// Answer the later request first.
				if err = send(q); err == nil {
					err = send(*held)
				}
				held = nil
			case q.off+q.n >= int64(len(f.data)):
				err = send(q)
			default:
				held = &q
			}
		case xrdwire.ReqStat:
			if f.mode == "redirect" {
				host, port, _ := net.SplitHostPort(f.redirect)
				p, _ := strconv.Atoi(port)
				err = answer(c, sid, xrdwire.StatusRedirect, append(binary.BigEndian.AppendUint32(nil, uint32(p)), host...))
			} else {
				err = answer(c, sid, xrdwire.StatusOK, nil)
			}
		case xrdwire.ReqDirlist:
			if f.dirlist == nil {
				err = answer(c, sid, xrdwire.StatusError, append(binary.BigEndian.AppendUint32(nil, codeUnsupported), "no dirlist\x00"...))
			} else {
				err = f.dirlist(c, sid)
			}
		case xrdwire.ReqClose:
			f.closes.Add(1) // before the answer the client waits for
			err = answer(c, sid, xrdwire.StatusOK, nil)
		default:
			err = answer(c, sid, xrdwire.StatusOK, nil)
		}
		if err != nil {
			return
		}
	}
}

// TestDirectCloseAfterWholeRead: a reader that read its file to the end
// closes the file on the server (kXR_close, answered) before Close
// returns. xrootd shares open handles by path: one left to the dropped
// connection served a later open of the path, after a Put replaced the
// file, the old bytes (the conformance suite's Put/replace, now and
// then).
func TestDirectCloseAfterWholeRead(t *testing.T) {
	f := &rawFake{data: randomData(2500, 6)}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	e.readChunk = 1000
	got, err := readAll(t, e, "/f", 0, -1)
	if err != nil || !bytes.Equal(got, f.data) {
		t.Fatalf("read %d bytes, %v; want %d equal", len(got), err, len(f.data))
	}
	if n := f.closes.Load(); n != 1 {
		t.Errorf("the server answered %d kXR_close after a whole read, want 1", n)
	}
}

// TestDirectOutOfOrder: answers to later requests that come first, in
// several frames, are kept aside and delivered in file order.
func TestDirectOutOfOrder(t *testing.T) {
	f := &rawFake{data: randomData(3500, 4), mode: "ooo"}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	e.readChunk = 1000
	got, err := readAll(t, e, "/f", 0, -1)
	if err != nil || !bytes.Equal(got, f.data) {
		t.Errorf("read %d bytes, %v; want %d equal", len(got), err, len(f.data))
	}
	if n := len(f.reads); n != 4 {
		t.Errorf("server answered %d reads, want 4", n)
	}
	if _, err := e.Open(context.Background(), "/g", 0, -1); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
}

// TestDirectFailures: a server that fails during a read gives a reader
// error of the right class (never io.EOF, never a hang), after delivering
// what it did send.
func TestDirectFailures(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want []error
	}{
		{"die", []error{endpoint.ErrUnavailable}}, // EOF or a reset, as the kernel has it
		{"stall", []error{endpoint.ErrUnavailable}},
		{"ioerror", []error{endpoint.ErrUnavailable}},
		{"shrink", []error{endpoint.ErrUnavailable, io.ErrUnexpectedEOF}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := &rawFake{data: randomData(3000, 5), mode: tc.mode}
			e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", failTimeout)
			e.readChunk = 1000
			var got []byte
			err := within(t, hangBound, func() error {
				var err error
				got, err = readAll(t, e, "/f", 0, -1)
				return err
			})
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("read error = %v, want %v", err, w)
				}
			}
			if errors.Is(err, io.EOF) || errors.Is(err, endpoint.ErrNotFound) {
				t.Errorf("read error = %v, must not be EOF or not found", err)
			}
			switch tc.mode {
			case "stall", "shrink":
				if !bytes.Equal(got, f.data[:500]) {
					t.Errorf("delivered %d bytes before the error, want the 500 sent", len(got))
				}
			case "die": // a reset may lose what was sent
				if len(got) > 500 || !bytes.Equal(got, f.data[:len(got)]) {
					t.Errorf("delivered %d bytes before the error, want a prefix of the 500 sent", len(got))
				}
			}
		})
	}
}

// TestDirectCancel: a caller's ctx ending stops a read the server stalls.
func TestDirectCancel(t *testing.T) {
	f := &rawFake{data: randomData(3000, 6), mode: "stall"}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := e.Open(ctx, "/f", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	go func() {
		<-f.reads // the server began answering and now stalls
		cancel()
	}()
	err = within(t, hangBound, func() error { _, err := io.ReadAll(rc); return err })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, endpoint.ErrUnavailable) {
		t.Errorf("read after cancel = %v, want ErrUnavailable and context.Canceled", err)
	}
}

// TestDirectFallback: a server that redirects the open (a redirector)
// makes Open use go-hep, which follows the redirect to the data server,
// and the endpoint stops trying the direct path.
func TestDirectFallback(t *testing.T) {
	x := startXRootD(t)
	data := randomData(100_000, 7)
	x.seed(t, "f.bin", data)
	host := x.endpoint(t).addr
	f := &rawFake{mode: "redirect", redirect: host}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//base", 5*time.Second)
	rc, err := e.Open(context.Background(), "/f.bin", 0, -1)
	if err != nil {
		t.Fatalf("Open through a redirect: %v", err)
	}
	defer rc.Close()
	if _, ok := rc.(*reader); !ok {
		t.Errorf("Open through a redirect gave a %T, want the go-hep reader", rc)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("read %d bytes, %v; want %d equal", len(got), err, len(data))
	}
	if !e.noDirect.Load() {
		t.Error("after a redirect the endpoint still tries direct reads")
	}
}

// TestDirectGoHEPServer: a server whose kXR_open answer has no stat
// (go-hep's) is asked with kXR_stat on the handle, and still read directly.
func TestDirectGoHEPServer(t *testing.T) {
	dir := t.TempDir()
	data := randomData(70_000, 8)
	if err := os.WriteFile(filepath.Join(dir, "f.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := xrootd.NewServer(xrootd.NewFSHandler(dir), nil)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()); <-done })

	e := newEndpoint(t, "root://"+ln.Addr().String()+"//", 5*time.Second)
	e.readChunk = 30_000
	rc, err := e.Open(context.Background(), "/f.bin", 5, -1)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rc.Close()
	if _, ok := rc.(*directReader); !ok {
		t.Errorf("Open gave a %T, want the direct reader", rc)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data[5:]) {
		t.Errorf("read %d bytes, %v; want %d equal", len(got), err, len(data)-5)
	}
}

// TestDirectWait: a server asking to wait on the direct open gets that
// call served through go-hep, and later calls still go direct.
func TestDirectWait(t *testing.T) {
	f := &rawFake{data: randomData(2000, 9), mode: "wait"}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	for i, wantDirect := range []bool{false, true} {
		rc, err := e.Open(context.Background(), "/f", 0, -1)
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		if _, ok := rc.(*directReader); ok != wantDirect {
			t.Errorf("Open %d gave a %T, want direct=%v", i, rc, wantDirect)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, f.data) {
			t.Errorf("read %d: %d bytes, %v; want %d equal", i, len(got), err, len(f.data))
		}
	}
}
