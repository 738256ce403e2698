package xrootd

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// seekNS is fakeNS whose readers move from range to range
// (endpoint.RangeSeeker), as the federation's do.
type seekNS struct {
	*fakeNS
	opens, seeks atomic.Int64
}

func (n *seekNS) Open(ctx context.Context, p string, off, l int64) (io.ReadCloser, error) {
	n.opens.Add(1)
	b, ok := n.get(p)
	if !ok {
		return nil, fmt.Errorf("fake: open %q: %w", p, endpoint.ErrNotFound)
	}
	r := &seekReader{ns: n, data: b}
	if err := r.SeekRange(off, l); err != nil {
		return nil, err
	}
	n.seeks.Add(-1) // the open's own range is not a seek
	return r, nil
}

// seekReader reads the bytes its open saw, one range at a time.
type seekReader struct {
	ns       *seekNS
	data     []byte
	pos, end int64
}

func (r *seekReader) SeekRange(off, n int64) error {
	r.ns.seeks.Add(1)
	if off < 0 || off > int64(len(r.data)) {
		return fmt.Errorf("fake: seek to %d: %w", off, endpoint.ErrRefused)
	}
	if n < 0 || off+n > int64(len(r.data)) {
		n = int64(len(r.data)) - off
	}
	r.pos, r.end = off, off+n
	return nil
}

func (r *seekReader) Read(p []byte) (int, error) {
	if r.pos >= r.end {
		return 0, io.EOF
	}
	n := copy(p[:min(int64(len(p)), r.end-r.pos)], r.data[r.pos:])
	r.pos += int64(n)
	return n, nil
}

func (r *seekReader) Close() error { return nil }

func (r *seekReader) Version() endpoint.Info {
	return endpoint.Info{Size: int64(len(r.data)), ModTime: mtime}
}

// TestOneReaderPerHandle: reads, readv and pgread at scattered offsets
// are all answered from the one reader the handle's first read opened,
// moved from range to range: no namespace open (a look-up, a ranking, a
// wait for a checksum) per read.
func TestOneReaderPerHandle(t *testing.T) {
	ns := &seekNS{fakeNS: newFakeNS()}
	data := payload(6<<20, 7)
	ns.set("/f", data)
	_, addr := startDoor(t, ns, Options{})
	r := dialRaw(t, addr)
	fh := r.open("/f", 0x10)
	rng := rand.New(rand.NewPCG(1, 2))
	at := func() (int64, int32) {
		off := rng.Int64N(int64(len(data)))
		return off, int32(1 + rng.IntN(300<<10))
	}
	for range 20 {
		off, n := at()
		st, body := r.answer(r.request(3013, fhParams(fh, off, n), nil))
		if want := data[off:min(off+int64(n), int64(len(data)))]; st != 0 || !bytes.Equal(body, want) {
			t.Fatalf("read %d at %d: status %d, %d bytes, want %d (or bytes differ)", n, off, st, len(body), len(want))
		}
	}
	var items [][2]int64
	for range 30 {
		off, n := at()
		items = append(items, [2]int64{off, int64(n) / 8})
	}
	st, body := r.answer(r.request(3025, nil, readvList(fh, items...)))
	if st != 0 {
		t.Fatalf("readv: status %d %q", st, body)
	}
	for i, it := range items {
		n := int64(binary.BigEndian.Uint32(body[4:]))
		if want := data[it[0]:min(it[0]+it[1], int64(len(data)))]; !bytes.Equal(body[16:16+n], want) {
			t.Fatalf("readv item %d: %d bytes, want %d (or bytes differ)", i, n, len(want))
		}
		body = body[16+n:]
	}
	for range 5 {
		off, n := at()
		sid := r.request(reqPgRead, fhParams(fh, off, n), nil)
		var got []byte
		for {
			fs, st, body := r.frame()
			if fs != sid || st != statusStatus {
				t.Fatalf("pgread: frame for %v status %d, want %v kXR_status", fs, st, sid)
			}
			pg := body[24:]
			first := pageSize - int((off+int64(len(got)))%pageSize)
			for len(pg) > 0 {
				l := min(first, len(pg)-4)
				first = pageSize
				if crc32.Checksum(pg[4:4+l], castagnoli) != binary.BigEndian.Uint32(pg) {
					t.Fatal("pgread: page CRC wrong")
				}
				got = append(got, pg[4:4+l]...)
				pg = pg[4+l:]
			}
			if body[7] == finalResult {
				break
			}
		}
		if want := data[off:min(off+int64(n), int64(len(data)))]; !bytes.Equal(got, want) {
			t.Fatalf("pgread %d at %d: %d bytes, want %d (or bytes differ)", n, off, len(got), len(want))
		}
	}
	if n := ns.opens.Load(); n != 1 {
		t.Errorf("namespace opens for 55 scattered reads of one handle = %d, want 1 (one kept reader)", n)
	}
	if n := ns.seeks.Load(); n < 50 {
		t.Errorf("reader moved %d times for 55 scattered reads, want at least 50", n)
	}
}
