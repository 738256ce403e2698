package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fuzzConn is a connection whose client side is a fixed byte string:
// reads take from it, writes are counted and dropped.
type fuzzConn struct {
	r       *bytes.Reader
	mu      sync.Mutex
	closed  bool
	written int
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}

func (c *fuzzConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	c.written += len(p)
	return len(p), nil
}

func (c *fuzzConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return nil
}

func (c *fuzzConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1094} }
func (c *fuzzConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}

func (c *fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// handshakeBytes is the client's handshake.
func handshakeBytes() []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint32(b[12:], 4)
	binary.BigEndian.PutUint32(b[16:], 2012)
	return b
}

// frame builds a request: stream id 0,1, id, params, data (dlen is
// len(data) unless dlen >= 0 overrides it).
func frame(id uint16, params []byte, data []byte, dlen int64) []byte {
	var h header
	h[1] = 1
	binary.BigEndian.PutUint16(h[2:], id)
	copy(h[4:20], params)
	if dlen < 0 {
		dlen = int64(len(data))
	}
	binary.BigEndian.PutUint32(h[20:], uint32(dlen))
	return append(h[:], data...)
}

func fhParams(fh uint32, off int64, n int32) []byte {
	p := make([]byte, 16)
	binary.BigEndian.PutUint32(p, fh)
	binary.BigEndian.PutUint64(p[4:], uint64(off))
	binary.BigEndian.PutUint32(p[12:], uint32(n))
	return p
}

func openParams(opts uint16) []byte {
	p := make([]byte, 16)
	binary.BigEndian.PutUint16(p[2:], opts)
	return p
}

func readvList(fh uint32, items ...[2]int64) []byte {
	var b []byte
	for _, it := range items {
		b = binary.BigEndian.AppendUint32(b, fh)
		b = binary.BigEndian.AppendUint32(b, uint32(it[1]))
		b = binary.BigEndian.AppendUint64(b, uint64(it[0]))
	}
	return b
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// FuzzRequest feeds a request stream, after a valid handshake, to one
// connection's handler: it must not panic, must return once the stream
// ends, and must not allocate in proportion to the lengths the stream
// claims.
func FuzzRequest(f *testing.F) {
	session := cat(frame(3006, nil, nil, -1), frame(3007, nil, nil, -1))
	f.Add(session)
	// A whole read session: stat, open, read, pgread, readv, close.
	f.Add(cat(session,
		frame(3017, nil, []byte("/f?x=y"), -1),
		frame(3010, openParams(0x0410), []byte("/f"), -1),
		frame(3013, fhParams(1, 0, 4096), nil, -1),
		frame(3013, fhParams(1, 4096, 1<<20), nil, -1),
		frame(3030, fhParams(1, 100, 70000), nil, -1),
		frame(3025, nil, readvList(1, [2]int64{0, 10}, [2]int64{60000, 10000}), -1),
		frame(3017, fhParams(0, 0, 0), nil, -1),
		frame(3003, fhParams(1, 0, 0), nil, -1)))
	// An upload: open for write, write, pgwrite (valid and bad CRCs), close.
	f.Add(cat(session,
		frame(3010, openParams(0x0028), []byte("/up"), -1),
		frame(3019, fhParams(1, 0, 0), []byte("hello"), -1),
		frame(3026, fhParams(1, 5, 0), pages(nil, []byte("world, page data"), 5), -1),
		frame(3026, fhParams(1, 0, 0), []byte{1, 2, 3, 4, 5, 6}, -1),
		frame(3016, fhParams(1, 0, 0), nil, -1),
		frame(3003, fhParams(1, 0, 0), nil, -1)))
	// lakefed's own client's atomic upload: temporary name, close, rename.
	tmpName := "/d/.f.lakefed-0123456789abcdef"
	f.Add(cat(session,
		frame(3010, openParams(0x0108), []byte(tmpName), -1),
		frame(3019, fhParams(1, 0, 0), []byte("held"), -1),
		frame(3003, fhParams(1, 0, 0), nil, -1),
		frame(3009, []byte{14: 0, 15: byte(len(tmpName))}, []byte(tmpName+" /d/f"), -1),
		frame(3014, nil, []byte(tmpName), -1)))
	// Metadata: dirlist with stat, statx, locate, query checksum, redirect.
	f.Add(cat(session,
		frame(3004, append(make([]byte, 15), 2), []byte("/"), -1),
		frame(3022, nil, []byte("/f\n/none\n/../x"), -1),
		frame(3027, nil, []byte("/f"), -1),
		frame(3001, []byte{0, 3}, []byte("/f?cks.type=adler32"), -1),
		frame(3010, openParams(0x0010), []byte("/r"), -1)))
	// Malformed: huge dlen, negative dlen, unknown request, truncated
	// frame, readv of a bad length, reads of handles never opened.
	f.Add(cat(session, frame(3017, nil, nil, 0x7fffffff)))
	f.Add(cat(session, frame(3019, fhParams(1, 0, 0), nil, 1<<30)))
	f.Add(cat(session, frame(3017, nil, nil, 0xffffffff)))
	f.Add(cat(session, frame(4242, nil, []byte("x"), -1), frame(3011, nil, nil, -1)))
	f.Add(cat(session, frame(3017, nil, []byte("/f"), 100)[:30]))
	f.Add(cat(session, frame(3025, nil, []byte("short"), -1), frame(3025, nil, readvList(7, [2]int64{0, 1 << 30}), -1)))
	f.Add(cat(session, frame(3013, fhParams(9, -1, -1), nil, -1), frame(3030, fhParams(1, 0, 0), nil, -1)))
	f.Add([]byte{0, 1, 0xb, 0xbe})

	ns := newFakeNS()
	ns.set("/f", payload(64<<10, 7))
	ns.replicas["/r"] = []*url.URL{{Scheme: "root", Host: "127.0.0.1:1", Path: "/r"}}
	ns.set("/r", []byte("r"))
	s := New(ns, Options{Log: slog.New(slog.DiscardHandler), TempDir: f.TempDir(), MaxInFlight: 4})

	f.Fuzz(func(t *testing.T, in []byte) {
		c := &fuzzConn{r: bytes.NewReader(append(handshakeBytes(), in...))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.serveConn(context.Background(), c)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("handler did not return within 10s of the stream's end")
		}
		runtime.ReadMemStats(&after)
		// Two 2 MiB part buffers per request in flight (pgread) at most,
		// plus the request data (64 KiB each): far below what any claimed
		// length could make it allocate.
		if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
			t.Errorf("handler allocated %d MiB for %d input bytes", d>>20, len(in))
		}
	})
}
