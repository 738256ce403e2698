//go:build !amd64

package httpx

const adlerAVX2 = false

func adler32Chunk([]byte) (sum1, sum2 uint32) { panic("httpx: adler32Chunk without AVX2") }
