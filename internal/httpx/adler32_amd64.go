package httpx

import "golang.org/x/sys/cpu"

// adlerAVX2 says adler32Chunk may run: it sums 32 bytes per step in
// vector registers (VPSADBW for the plain sum, VPMADDUBSW by the weights
// 32…1 for the weighted one), 8× the rate of the 64-bit lanes
// (BenchmarkAdler32 against BenchmarkAdler32Lanes, 1 MiB: 45 against
// 5.7 GB/s). The cache takes the adler32 of every block it fills, and it
// was a quarter of a cold miss's CPU.
var adlerAVX2 = cpu.X86.HasAVX2

// adler32Chunk returns, for p (a multiple of 32 bytes, at most 5536),
// the sum of its bytes and the sum of each byte times its distance from
// the end (len(p)−k for byte k): what p adds to s1, and to s2 beyond
// len(p)·s1. Implemented in adler32_amd64.s.
//
//go:noescape
func adler32Chunk(p []byte) (sum1, sum2 uint32)
