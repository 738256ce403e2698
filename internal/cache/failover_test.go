package cache_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakefed/lakefed/internal/cache"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/federation"
)

// cutter is a TCP proxy in front of a server that dies, as a server
// killed with -9 does, once it has sent limit bytes: every connection is
// reset and the port refuses new ones.
type cutter struct {
	ln    net.Listener
	up    string
	limit int64
	sent  atomic.Int64
	mu    sync.Mutex
	conns []net.Conn
	dead  atomic.Bool
}

func newCutter(t *testing.T, upstream string, limit int64) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, up: upstream, limit: limit}
	go c.accept()
	t.Cleanup(c.kill)
	return c
}

func (c *cutter) accept() {
	for {
		down, err := c.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", c.up)
		if err != nil {
			down.Close()
			continue
		}
		c.mu.Lock()
		c.conns = append(c.conns, down, up)
		c.mu.Unlock()
		go func() { io.Copy(up, down); up.Close() }()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := up.Read(buf)
				if n > 0 {
					if c.sent.Add(int64(n)) > c.limit {
						c.kill()
						return
					}
					if _, werr := down.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					down.Close()
					return
				}
			}
		}()
	}
}

func (c *cutter) kill() {
	if c.dead.Swap(true) {
		return
	}
	c.ln.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.conns {
		if tc, ok := cn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not a clean end
		}
		cn.Close()
	}
}

// The origin is the federation: when the replica a fill reads from dies
// mid-read, the read completes, byte-identical, from the other replica.
func TestOriginReplicaKilledMidRead(t *testing.T) {
	a, b := startOrigin(t), startOrigin(t)
	data := random(96<<20, 21)
	a.write(t, "f", data)
	b.write(t, "f", data)
	// The sites keep the file's adler32, as they do for every file
	// uploaded to them: the federation proves the replicas identical by
	// it before it moves a read from one to the other.
	for _, o := range []*origin{a, b} {
		req, _ := http.NewRequest(http.MethodHead, o.URL+"f", nil)
		req.Header.Set("Want-Digest", "adler32")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.Header.Get("Digest") == "" {
			t.Fatalf("HEAD with Want-Digest: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	cut := newCutter(t, a.URL[len("http://"):len(a.URL)-1], 20<<20)
	cfg, err := config.Parse([]byte(`
listen: 127.0.0.1:0
federation:
  mode: proxy
  health: {interval: 1h}
  endpoints:
    - {name: site-a, url: "http://` + cut.ln.Addr().String() + `/", priority: 1}
    - {name: site-b, url: "` + b.URL + `", priority: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	fed, err := federation.New(t.Context(), *cfg.Federation, federation.Options{Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fed.Close() })
	n := startCache(t, cache.Config{BlockSize: 1 << 20, RAM: -1}, fed.Namespace())
	sentB := b.sent(t)
	resp, got := get(t, n.URL+"/f")
	if resp.StatusCode != 200 || !bytes.Equal(got, data) {
		t.Fatalf("GET through the cache = %d, %d bytes, identical %v", resp.StatusCode, len(got), bytes.Equal(got, data))
	}
	if !cut.dead.Load() {
		t.Fatal("site-a never died: the test did not test failover")
	}
	if d := b.sentSince(t, sentB); d == 0 || d >= int64(len(data)) {
		t.Errorf("site-b sent %d bytes; want the rest after site-a died, not the whole file", d)
	}
}
