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
