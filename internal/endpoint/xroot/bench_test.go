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

// BenchmarkRead reads one file whole through the kind (its own
// connection, kXR_read by hand: direct.go), through go-hep's client (the
// fallback path), and, as baselines, with xrdcp from the same server and
// from the local disk. xrdcp 5 reads with kXR_pgread by default (a CRC32C
// per 4 KiB page on both ends), which costs it most of its speed; the
// xrdcp-read case turns that off (XRD_CPUSEPGWRTRD=0) to compare plain
// kXR_read with plain kXR_read.
//
//	go test -run '^$' -bench Read -benchtime 5x ./internal/endpoint/xroot/
func BenchmarkRead(b *testing.B) {
	x := startXRootD(b)
	x.seed(b, "big.bin", randomData(benchSize, 9))
	e := x.endpoint(b)
	viaGoHEP := x.endpoint(b)
	viaGoHEP.noDirect.Store(true)
	for _, k := range []struct {
		name string
		e    *Endpoint
	}{{"kind", e}, {"kind-gohep", viaGoHEP}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				rc, err := k.e.Open(context.Background(), "/big.bin", 0, -1)
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
	}
	for _, c := range []struct {
		name string
		env  []string
	}{{"xrdcp", nil}, {"xrdcp-read", []string{"XRD_CPUSEPGWRTRD=0"}}} {
		b.Run(c.name, func(b *testing.B) {
			xrdcp := testenv.Require(b, "xrdcp")
			b.SetBytes(benchSize)
			for b.Loop() {
				cmd := exec.Command(xrdcp, "-f", "-s", x.srv.RootURL+"/base/big.bin", "/dev/null")
				cmd.Env = append(os.Environ(), c.env...)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("xrdcp: %v: %s", err, out)
				}
			}
		})
	}
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
