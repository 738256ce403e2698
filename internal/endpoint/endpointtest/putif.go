package endpointtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// putIf holds a ConditionalPutter to its contract: a Put commits only if
// its condition holds at the commit, atomically with it; when it does
// not, nothing changes and the error wraps ErrPrecondition. Of writers
// racing with one condition exactly one wins. A server that cannot
// (Caps.NoConditionalPut) is refused with ErrUnsupported before a byte
// of the body is read.
func (s *suite) putIf(t *testing.T) {
	cp := s.ep.(endpoint.ConditionalPutter)
	ctx := ctxFor(t)
	putIf := func(p string, body []byte, cond endpoint.Cond) error {
		return cp.PutIf(ctx, p, bytes.NewReader(body), int64(len(body)), cond)
	}
	if s.Caps.NoConditionalPut {
		r := &watchedReader{r: strings.NewReader("abc")}
		err := cp.PutIf(ctx, "/c-putif/never", r, 3, endpoint.Cond{IfNoneMatch: true})
		wantClass(t, "PutIf on a server that ignores conditions", err, endpoint.ErrUnsupported)
		if r.read.Load() {
			t.Error("PutIf read the body before refusing")
		}
		_, err = s.ep.Stat(ctx, "/c-putif/never")
		wantClass(t, "Stat after the refused PutIf", err, endpoint.ErrNotFound)
		return
	}
	holds := func(p, want string) {
		t.Helper()
		got, err := s.readAll(t, p, 0, -1)
		if err != nil || string(got) != want {
			t.Errorf("%s reads %q, %v; want %q", p, got, err, want)
		}
	}
	const f = "/c-putif/f"
	if err := putIf(f, []byte("one"), endpoint.Cond{IfNoneMatch: true}); err != nil {
		t.Fatalf("PutIf(If-None-Match) of a new path = %v", err)
	}
	holds(f, "one")
	wantClass(t, "PutIf(If-None-Match) onto a file", putIf(f, []byte("two"), endpoint.Cond{IfNoneMatch: true}), endpoint.ErrPrecondition)
	holds(f, "one")
	in, err := s.ep.Stat(ctx, f)
	if err != nil || in.ETag == "" {
		t.Fatalf("Stat(%q) = %+v, %v; want an ETag to match on", f, in, err)
	}
	wantClass(t, "PutIf(If-Match another ETag)", putIf(f, []byte("three"), endpoint.Cond{IfMatch: "x" + in.ETag}), endpoint.ErrPrecondition)
	holds(f, "one")
	big := data(3<<20+5, 11)
	wantClass(t, "PutIf(If-Match another ETag) of a large body", putIf(f, big, endpoint.Cond{IfMatch: "x" + in.ETag}), endpoint.ErrPrecondition)
	holds(f, "one")
	wantClass(t, "PutIf(If-Match) of a missing path", putIf("/c-putif/missing", []byte("x"), endpoint.Cond{IfMatch: in.ETag}), endpoint.ErrPrecondition)
	_, err = s.ep.Stat(ctx, "/c-putif/missing")
	wantClass(t, "Stat after a refused PutIf(If-Match)", err, endpoint.ErrNotFound)
	if err := putIf(f, []byte("four"), endpoint.Cond{IfMatch: in.ETag}); err != nil {
		t.Fatalf("PutIf(If-Match the current ETag) = %v", err)
	}
	holds(f, "four")
	wantClass(t, "PutIf(If-Match an ETag replaced since)", putIf(f, []byte("five"), endpoint.Cond{IfMatch: in.ETag}), endpoint.ErrPrecondition)
	holds(f, "four")

	// A Delete between the look and the commit wins: the write that saw
	// the deleted file is refused, it does not bring it back.
	in, err = s.ep.Stat(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ep.Delete(ctx, f); err != nil {
		t.Fatal(err)
	}
	wantClass(t, "PutIf(If-Match) of a deleted file", putIf(f, big, endpoint.Cond{IfMatch: in.ETag}), endpoint.ErrPrecondition)
	_, err = s.ep.Stat(ctx, f)
	wantClass(t, "Stat after a refused PutIf of a deleted file", err, endpoint.ErrNotFound)

	// Racing writers with one condition: exactly one wins.
	race := func(p string, cond func() endpoint.Cond) {
		t.Helper()
		const n = 6
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = putIf(p, []byte(fmt.Sprintf("writer %d", i)), cond()) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("%s: writers %d and %d both won", p, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, endpoint.ErrPrecondition):
				t.Errorf("%s: writer %d = %v, want nil or ErrPrecondition", p, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer won", p)
		}
		holds(p, fmt.Sprintf("writer %d", winner))
	}
	race("/c-putif/race-new", func() endpoint.Cond { return endpoint.Cond{IfNoneMatch: true} })
	in, err = s.ep.Stat(ctx, "/c-putif/race-new")
	if err != nil {
		t.Fatal(err)
	}
	race("/c-putif/race-new", func() endpoint.Cond { return endpoint.Cond{IfMatch: in.ETag} })
}

// watchedReader says whether it was read.
type watchedReader struct {
	r    io.Reader
	read atomic.Bool
}

func (w *watchedReader) Read(p []byte) (int, error) {
	w.read.Store(true)
	return w.r.Read(p)
}
