package s3_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// pattern is size bytes of pseudo-random data made on the fly, in 1 MiB
// blocks each seeded by its index, so any range can be made again without
// keeping the data anywhere.
type pattern struct {
	size, off int64
	block     []byte
	blockIdx  int64
}

const patBlock = 1 << 20

func newPattern(size int64) *pattern { return &pattern{size: size, blockIdx: -1} }

func (p *pattern) fill(i int64) []byte {
	if p.blockIdx != i {
		if p.block == nil {
			p.block = make([]byte, patBlock)
		}
		r := rand.New(rand.NewPCG(uint64(i), 99))
		for j := 0; j < patBlock; j += 8 {
			binary.LittleEndian.PutUint64(p.block[j:], r.Uint64())
		}
		p.blockIdx = i
	}
	return p.block
}

// ReadAt fills b with the bytes at off.
func (p *pattern) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) && off < p.size {
		blk := p.fill(off / patBlock)
		c := copy(b[n:], blk[off%patBlock:min(patBlock, p.size-off/patBlock*patBlock)])
		n += c
		off += int64(c)
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (p *pattern) Read(b []byte) (int, error) {
	n, err := p.ReadAt(b, p.off)
	p.off += int64(n)
	return n, err
}

// TestPut6GiB streams 6 GiB of unknown length into S3 (multipart, 64 MiB
// parts, then a multipart copy to store the adler32, since the object is
// above the 5 GiB a single copy takes), and checks the stored adler32
// against the one of the generated data, and some ranges. The data is made
// as it is sent, never kept. It needs about 20 GiB of free disk for
// s3proxy and a few minutes, so it runs only with LAKEFED_S3_BIG=1.
func TestPut6GiB(t *testing.T) {
	if os.Getenv("LAKEFED_S3_BIG") != "1" {
		t.Skip("set LAKEFED_S3_BIG=1 to run the 6 GiB upload")
	}
	const size = 6 << 30
	srv := testenv.StartS3(t)
	ep := newEP(t, config(srv, "big", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	h := adler32.New()
	start := time.Now()
	if err := ep.Put(ctx, "/six.bin", io.TeeReader(onlyReader{newPattern(size)}, h), -1); err != nil {
		t.Fatalf("Put(6 GiB) = %v", err)
	}
	t.Logf("put 6 GiB in %v", time.Since(start))
	want := fmt.Sprintf("%08x", h.Sum32())
	in, err := ep.Stat(ctx, "/six.bin")
	if err != nil || in.Size != size || in.Checksums["adler32"] != want {
		t.Fatalf("Stat = %+v, %v; want size %d, adler32 %s", in, err, int64(size), want)
	}
	if got, err := ep.Checksum(ctx, "/six.bin", "adler32"); err != nil || got != want {
		t.Errorf("Checksum(adler32) = %s, %v, want %s", got, err, want)
	}
	pat := newPattern(size)
	for _, off := range []int64{0, 5<<30 - 100, size - 1000} {
		want := make([]byte, 1000)
		pat.ReadAt(want, off)
		rc, err := ep.Open(ctx, "/six.bin", off, 1000)
		if err != nil {
			t.Fatalf("Open(%d, 1000) = %v", off, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Open(%d, 1000): %d bytes, %v; want the generated ones", off, len(got), err)
		}
	}
	// Read it all back and check the adler32 of what S3 serves.
	start = time.Now()
	rc, err := ep.Open(ctx, "/six.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h2 := adler32.New()
	n, err := io.Copy(h2, rc)
	if err != nil || n != size || fmt.Sprintf("%08x", h2.Sum32()) != want {
		t.Errorf("read back %d bytes, %v, adler32 %s; want %d, %s", n, err, fmt.Sprintf("%08x", h2.Sum32()), int64(size), want)
	}
	t.Logf("read 6 GiB in %v", time.Since(start))
}
