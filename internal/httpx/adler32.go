package httpx

import (
	"encoding/binary"
	"fmt"
	"hash"
)

// The adler32 here is RFC 1950's, faster than hash/adler32: lakefed
// computes it in line with every upload and copy, and hash/adler32 (about
// 2 GB/s, a byte-serial dependency chain) took more CPU on a storage PUT
// than the network and the disk together. On AVX2 cores it sums 32
// bytes a step in vector registers (adler32_amd64.s), elsewhere in
// 64-bit lanes. The values are the same; TestAdler32 checks both ways
// against hash/adler32.

const (
	adlerMod  = 65521
	adlerNMax = 5552 // largest n with 255·n(n+1)/2 + (n+1)(mod−1) < 2^32 (zlib's NMAX)
)

// adler32Digest is an RFC 1950 Adler-32 running value; NewHash(Adler32)
// returns one.
type adler32Digest uint32

func (d *adler32Digest) Reset()         { *d = 1 }
func (d *adler32Digest) Size() int      { return 4 }
func (d *adler32Digest) BlockSize() int { return 4 }
func (d *adler32Digest) Sum32() uint32  { return uint32(*d) }

func (d *adler32Digest) Write(p []byte) (int, error) {
	*d = adler32Digest(adler32Update(uint32(*d), p))
	return len(p), nil
}

func (d *adler32Digest) Sum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, uint32(*d))
}

// Weights for one 32-byte block: s2 gains 32·s1 + Σ (32−i)·p[i] and s1
// gains Σ p[i]. Each 8-byte word is split into its even and odd bytes, as
// four 16-bit lanes each; multiplying the lanes by a constant that holds
// the weights in reverse lane order leaves the weighted sum in the top
// lane (no lane can carry: 4 terms of at most 255·32 stay below 2^16).
var adlerEven, adlerOdd = func() (e, o [4]uint64) {
	for k := range 4 {
		for i := range 4 {
			e[k] |= uint64(32-(8*k+2*i)) << (16 * (3 - i))
			o[k] |= uint64(32-(8*k+2*i+1)) << (16 * (3 - i))
		}
	}
	return e, o
}()

// adler32Update adds p to the running value d.
func adler32Update(d uint32, p []byte) uint32 { return adler32Add(d, p, adlerAVX2) }

// adler32Add is adler32Update, with adler32Chunk when vector (on AVX2
// cores) and the 64-bit lanes below otherwise.
func adler32Add(d uint32, p []byte, vector bool) uint32 {
	const lanes = 0x00ff00ff00ff00ff
	const ones = 0x0001000100010001
	s1, s2 := d&0xffff, d>>16
	for len(p) > 0 {
		q := p
		if len(q) > adlerNMax {
			q = q[:adlerNMax]
		}
		p = p[len(q):]
		if vector && len(q) >= 32 {
			n := len(q) &^ 31
			sum1, sum2 := adler32Chunk(q[:n])
			s2 += uint32(n)*s1 + sum2
			s1 += sum1
			q = q[n:]
		}
		for len(q) >= 32 {
			w0 := binary.LittleEndian.Uint64(q[0:])
			w1 := binary.LittleEndian.Uint64(q[8:])
			w2 := binary.LittleEndian.Uint64(q[16:])
			w3 := binary.LittleEndian.Uint64(q[24:])
			e0, o0 := w0&lanes, w0>>8&lanes
			e1, o1 := w1&lanes, w1>>8&lanes
			e2, o2 := w2&lanes, w2>>8&lanes
			e3, o3 := w3&lanes, w3>>8&lanes
			sum := (e0 + o0 + e1 + o1 + e2 + o2 + e3 + o3) * ones >> 48
			weighted := e0*adlerEven[0]>>48 + o0*adlerOdd[0]>>48 +
				e1*adlerEven[1]>>48 + o1*adlerOdd[1]>>48 +
				e2*adlerEven[2]>>48 + o2*adlerOdd[2]>>48 +
				e3*adlerEven[3]>>48 + o3*adlerOdd[3]>>48
			s2 += 32*s1 + uint32(weighted)
			s1 += uint32(sum)
			q = q[32:]
		}
		for _, b := range q {
			s1 += uint32(b)
			s2 += s1
		}
		s1 %= adlerMod
		s2 %= adlerMod
	}
	return s2<<16 | s1
}

// NewAdler32 returns a fresh adler32 hash, the one NewHash(Adler32) gives.
func NewAdler32() hash.Hash32 {
	d := adler32Digest(1)
	return &d
}

// Adler32Of returns data's adler32 as 8 lower-case hex digits.
func Adler32Of(data []byte) string {
	return fmt.Sprintf("%08x", adler32Update(1, data))
}
