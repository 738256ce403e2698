package endpointtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// FailTimeout is the endpoint Timeout RunFailures asks for.
const FailTimeout = 300 * time.Millisecond

// failBound is how long one operation may take against a server that
// hangs: a bound that catches a missing timeout, not a speed measurement.
const failBound = 5 * time.Second

// RunFailures checks how a network kind reports servers that fail. It
// starts its own broken servers and calls newEndpoint with each base URL
// ("http://127.0.0.1:PORT/") and FailTimeout:
//   - down (connection refused): every method and Probe wrap ErrUnavailable;
//   - hanging (accepts, never answers): every method wraps ErrUnavailable
//     within a few seconds;
//   - answering 500: every method and Probe wrap ErrUnavailable;
//   - answering 403: every method wraps ErrRefused, and Probe is nil (the
//     server answers, so it is up).
func RunFailures(t *testing.T, newEndpoint func(t *testing.T, baseURL string, timeout time.Duration) endpoint.Endpoint) {
	t.Helper()
	t.Run("Down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		ep := newEndpoint(t, "http://"+addr+"/", FailTimeout)
		checkAll(t, ep, endpoint.ErrUnavailable, true)
	})
	t.Run("Hang", func(t *testing.T) {
		addr := hangServer(t)
		ep := newEndpoint(t, "http://"+addr+"/", FailTimeout)
		checkAll(t, ep, endpoint.ErrUnavailable, true)
	})
	for _, tc := range []struct {
		code  int
		class error
		probe bool
	}{
		{http.StatusInternalServerError, endpoint.ErrUnavailable, true},
		{http.StatusServiceUnavailable, endpoint.ErrUnavailable, true},
		{http.StatusForbidden, endpoint.ErrRefused, false},
		{http.StatusUnauthorized, endpoint.ErrRefused, false},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Error(w, "lakefed test: status "+fmt.Sprint(tc.code), tc.code)
			}))
			t.Cleanup(srv.Close)
			ep := newEndpoint(t, srv.URL+"/", FailTimeout)
			checkAll(t, ep, tc.class, tc.probe)
			err := ep.Probe(context.Background())
			if !tc.probe && err != nil {
				t.Errorf("Probe() against a %d server = %v, want nil (it answers)", tc.code, err)
			}
		})
	}
}

// hangServer accepts connections and never answers; they close at the
// end of the test.
func hangServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never answer
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// checkAll runs every method against ep and wants class from each;
// withProbe adds Probe.
func checkAll(t *testing.T, ep endpoint.Endpoint, class error, withProbe bool) {
	t.Helper()
	ops := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"Stat", func(ctx context.Context) error { _, err := ep.Stat(ctx, "/f"); return err }},
		{"List", func(ctx context.Context) error { _, err := ep.List(ctx, "/d"); return err }},
		{"Open", func(ctx context.Context) error {
			rc, err := ep.Open(ctx, "/f", 0, -1)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			if err == nil {
				return errors.New("read gave no error")
			}
			return err
		}},
		{"OpenRange", func(ctx context.Context) error {
			rc, err := ep.Open(ctx, "/f", 10, 20)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			if err == nil {
				return errors.New("read gave no error")
			}
			return err
		}},
		{"PutSmall", func(ctx context.Context) error { return ep.Put(ctx, "/f", strings.NewReader("hello"), 5) }},
		{"PutLarge", func(ctx context.Context) error {
			return ep.Put(ctx, "/f", io.LimitReader(zeros{}, 4<<20), 4<<20)
		}},
		{"PutUnknownSize", func(ctx context.Context) error { return ep.Put(ctx, "/f", strings.NewReader("hello"), -1) }},
		{"Delete", func(ctx context.Context) error { return ep.Delete(ctx, "/f") }},
		{"Mkdir", func(ctx context.Context) error { return ep.Mkdir(ctx, "/d/e") }},
	}
	if _, ok := ep.(endpoint.Checksummer); ok {
		ops = append(ops, struct {
			name string
			fn   func(ctx context.Context) error
		}{"Checksum", func(ctx context.Context) error {
			_, err := endpoint.Checksum(ctx, ep, "/f", "adler32")
			return err
		}})
	}
	if withProbe {
		ops = append(ops, struct {
			name string
			fn   func(ctx context.Context) error
		}{"Probe", func(ctx context.Context) error { return ep.Probe(ctx) }})
	}
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The context is a backstop far beyond the bound: a kind that
			// ignores its Timeout fails the bound, not the test binary.
			ctx, cancel := context.WithTimeout(context.Background(), 4*failBound)
			defer cancel()
			start := time.Now()
			err := op.fn(ctx)
			took := time.Since(start)
			if !errors.Is(err, class) {
				t.Errorf("%s = %v, want an error wrapping %v", op.name, err, class)
			}
			if class != endpoint.ErrRefused && (errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused)) {
				t.Errorf("%s = %v: a failure to answer must not look like an answer", op.name, err)
			}
			if took > failBound {
				t.Errorf("%s took %v, want it bounded by the Timeout (%v) within %v", op.name, took.Round(time.Millisecond), FailTimeout, failBound)
			}
		}()
	}
	wg.Wait()
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
