package httpx

import (
	"bytes"
	"hash/adler32"
	"math/rand/v2"
	"testing"
)

// TestAdler32 compares the fast adler32 with hash/adler32 on lengths
// around the block (32) and modulo (5552) sizes, all-0xff data (the
// overflow worst case), random data and split writes.
func TestAdler32(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 3<<20)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	ff := bytes.Repeat([]byte{0xff}, 3<<20)
	lengths := []int{0, 1, 31, 32, 33, 63, 64, 65, 5551, 5552, 5553, 5552 * 2, 5552*3 + 17, 1 << 20, 3 << 20}
	for _, data := range [][]byte{random, ff} {
		for _, n := range lengths {
			p := data[:n]
			want := adler32.Checksum(p)
			h := NewHash(Adler32)
			h.Write(p)
			if got := h.(interface{ Sum32() uint32 }).Sum32(); got != want {
				t.Errorf("adler32 of %d bytes (first %#x) = %08x, want %08x", n, p[:min(n, 1)], got, want)
			}
			// Both ways, whichever this core takes.
			for _, vector := range []bool{false, adlerAVX2} {
				if got := adler32Add(1, p, vector); got != want {
					t.Errorf("adler32Add of %d bytes (first %#x), vector %v = %08x, want %08x", n, p[:min(n, 1)], vector, got, want)
				}
			}
			// The same bytes in uneven pieces.
			h.Reset()
			for q := p; len(q) > 0; {
				k := min(len(q), 1+rng.IntN(7000))
				h.Write(q[:k])
				q = q[k:]
			}
			ref := adler32.New()
			ref.Write(p)
			if got := h.Sum(nil); !bytes.Equal(got, ref.Sum(nil)) {
				t.Errorf("adler32 of %d bytes in pieces = %x, want %x", n, got, ref.Sum(nil))
			}
		}
	}
}

func BenchmarkAdler32(b *testing.B) {
	p := bytes.Repeat([]byte("lakefed!"), 1<<17)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		adler32Update(1, p)
	}
}

// BenchmarkAdler32Lanes is the adler32 without adler32Chunk, as it was
// before it.
func BenchmarkAdler32Lanes(b *testing.B) {
	p := bytes.Repeat([]byte("lakefed!"), 1<<17)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		adler32Add(1, p, false)
	}
}

func BenchmarkAdler32Stdlib(b *testing.B) {
	p := bytes.Repeat([]byte("lakefed!"), 1<<17)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		adler32.Checksum(p)
	}
}
