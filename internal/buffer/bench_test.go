package buffer

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// BenchmarkPut measures an acknowledged PUT through Wrap on loopback:
// the body streamed and summed, the file and the spool directory
// fsynced, the journal row committed (WAL, synchronous=FULL). The mover
// runs beside it into a posix target.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			disk, _ := newPosix(b, "disk")
			_, srv := start(b, Config{Prefixes: []Prefix{{Prefix: "/", Targets: []endpoint.Endpoint{disk}}}}, nil, Options{})
			data := bytes.Repeat([]byte("x"), size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/f%d", srv.URL, i%64), bytes.NewReader(data))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
					b.Fatalf("PUT = %d", resp.StatusCode)
				}
			}
		})
	}
}
