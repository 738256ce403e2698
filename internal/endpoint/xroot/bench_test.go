package xroot

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lakefed/lakefed/internal/testenv"
)

// benchSize is the file read by BenchmarkRead: large enough for streaming
// to dominate, small enough for CI.
const benchSize = 256 << 20

// BenchmarkRead reads one file whole through the kind (pipelined
// kXR_read through go-hep) and, as baselines, with xrdcp from the same
// server and from the local disk.
//
//	go test -run '^$' -bench Read -benchtime 5x ./internal/endpoint/xroot/
func BenchmarkRead(b *testing.B) {
	x := startXRootD(b)
	x.seed(b, "big.bin", randomData(benchSize, 9))
	e := x.endpoint(b)
	b.Run("kind", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			rc, err := e.Open(context.Background(), "/big.bin", 0, -1)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil || n != benchSize {
				b.Fatalf("read %d bytes, %v; want %d", n, err, benchSize)
			}
		}
	})
	b.Run("xrdcp", func(b *testing.B) {
		xrdcp := testenv.Require(b, "xrdcp")
		b.SetBytes(benchSize)
		for b.Loop() {
			if out, err := exec.Command(xrdcp, "-f", "-s", x.srv.RootURL+"/base/big.bin", "/dev/null").CombinedOutput(); err != nil {
				b.Fatalf("xrdcp: %v: %s", err, out)
			}
		}
	})
	b.Run("local", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			f, err := os.Open(filepath.Join(x.base, "big.bin"))
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, onlyReader{f})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
