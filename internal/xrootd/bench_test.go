package xrootd

import (
	"encoding/binary"
	"testing"
)

// BenchmarkOpenClose measures open+close pairs per second through the
// door, each parallel client on its own connection, against an
// in-memory namespace: the door's own cost, without the federator's.
func BenchmarkOpenClose(b *testing.B) {
	ns := newFakeNS()
	ns.set("/store/f.root", payload(1000, 1))
	_, addr := startDoor(b, ns, Options{})
	b.RunParallel(func(pb *testing.PB) {
		r := dialRaw(b, addr)
		params := make([]byte, 16)
		for pb.Next() {
			fh := r.open("/store/f.root", 0x10)
			binary.BigEndian.PutUint32(params, fh)
			if st, _ := r.answer(r.request(3003, params, nil)); st != 0 {
				b.Fatalf("close: status %d", st)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "opens/s")
}

// BenchmarkMissing measures kXR_NotFound answers to opens of a file no
// endpoint has.
func BenchmarkMissing(b *testing.B) {
	_, addr := startDoor(b, newFakeNS(), Options{})
	b.RunParallel(func(pb *testing.PB) {
		r := dialRaw(b, addr)
		params := make([]byte, 16)
		binary.BigEndian.PutUint16(params[2:], 0x10)
		for pb.Next() {
			if st, _ := r.answer(r.request(3010, params, []byte("/store/none.root"))); st != 4003 {
				b.Fatalf("open of a missing file: status %d", st)
			}
		}
	})
}

// BenchmarkReads measures read, pgread and readv answers of 256 KiB at
// scattered offsets of one handle, over loopback, against an in-memory
// namespace whose readers move from range to range: the door's own cost
// per answer (allocs/op includes the client's side of the benchmark).
func BenchmarkReads(b *testing.B) {
	ns := &seekNS{fakeNS: newFakeNS()}
	ns.set("/f", payload(64<<20, 9))
	_, addr := startDoor(b, ns, Options{})
	for _, req := range []struct {
		name string
		send func(r *rawClient, fh uint32, off int64)
	}{
		{"read", func(r *rawClient, fh uint32, off int64) {
			if st, _ := r.answer(r.request(3013, fhParams(fh, off, 256<<10), nil)); st != 0 {
				b.Fatalf("read: status %d", st)
			}
		}},
		{"pgread", func(r *rawClient, fh uint32, off int64) {
			sid := r.request(reqPgRead, fhParams(fh, off, 256<<10), nil)
			for {
				fs, st, body := r.frame()
				if fs != sid || st != statusStatus {
					b.Fatalf("pgread: status %d", st)
				}
				if body[7] == finalResult {
					return
				}
			}
		}},
		{"readv", func(r *rawClient, fh uint32, off int64) {
			if st, _ := r.answer(r.request(3025, nil, readvList(fh, [2]int64{off, 128 << 10}, [2]int64{off + 1<<20, 128 << 10}))); st != 0 {
				b.Fatalf("readv: status %d", st)
			}
		}},
	} {
		b.Run(req.name, func(b *testing.B) {
			r := dialRaw(b, addr)
			fh := r.open("/f", 0x10)
			b.ReportAllocs()
			b.SetBytes(256 << 10)
			for i := 0; b.Loop(); i++ {
				req.send(r, fh, int64(i*7919%200)<<18)
			}
		})
	}
}
