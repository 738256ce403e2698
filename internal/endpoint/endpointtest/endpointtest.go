// Package endpointtest is the conformance suite every endpoint kind runs,
// against every server it talks to (posix on a temporary directory; http
// against the storage role, nginx and XRootD's XrdHttp). It holds each kind
// to the contract written in package endpoint, so the federator can treat
// all kinds alike.
//
//	func TestConformance(t *testing.T) {
//		endpointtest.Run(t, func(t *testing.T) endpointtest.Target {
//			return endpointtest.Target{Endpoint: newEndpoint(t)}
//		})
//	}
//
// Decisions the suite enforces for every kind:
//   - Open at off == size gives an empty reader (like io.ReaderAt at EOF, so
//     a cache can read to EOF at a block boundary); off > size wraps
//     ErrRefused (ErrBeyondEnd); a range running past the end is cut at
//     the end.
//   - Delete of a non-empty directory wraps ErrRefused, never removes a tree.
//   - Put with a reader that gives fewer or more bytes than size fails and
//     leaves no new file.
//   - A ConditionalPutter commits only when its condition holds at the
//     commit (one winner among racing writers), or refuses with
//     ErrUnsupported, unread, where its server cannot.
package endpointtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// Target is one endpoint under test and what its server cannot do. A zero
// Caps means the server can do everything, and the suite is strict.
type Target struct {
	Endpoint endpoint.Endpoint
	Caps     Caps
}

// Caps declares what a server lacks. Each field is a gap that was found on
// the real server and is named in the test that declares it.
type Caps struct {
	// Checksums lists the algorithms Checksum must answer (compared with
	// httpx.Sums). Others may wrap ErrUnsupported. Nil: none are required,
	// but any answer given must be right.
	Checksums []string
	// NoModTime: Stat's ModTime may be zero.
	NoModTime bool
	// PutNotAtomic: the server writes in place, so a Put that fails
	// mid-stream may leave a partial file (XrdHttp without POSC).
	PutNotAtomic bool
	// BadNameChars holds characters the server cannot keep in a name even
	// when percent-encoded (XrdHttp cuts a name at "?"); names with them
	// are left out.
	BadNameChars string
	// NoConditionalPut: the server ignores If-Match and If-None-Match on
	// PUT (nginx's dav module, XrdHttp), so the kind's PutIf must refuse
	// with ErrUnsupported, reading nothing.
	NoConditionalPut bool
	// NoSpace: the kind can report capacity, but this server does not
	// say it (no RFC 4331 quota properties); Space wraps ErrUnsupported.
	NoSpace bool
}

// timeout bounds each case's operations.
const timeout = 60 * time.Second

// Run runs the conformance cases against the endpoint newTarget returns.
// newTarget is called once; cases work in their own directories below the
// endpoint root (named /c-<case>), which must be writable.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Helper()
	tg := newTarget(t)
	s := &suite{Target: tg, ep: tg.Endpoint}
	cases := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Probe", s.probe},
		{"Stat", s.stat},
		{"Names", s.names},
		{"List", s.list},
		{"Read", s.read},
		{"ReadEmpty", s.readEmpty},
		{"Put", s.put},
		{"PutBadSize", s.putBadSize},
		{"Delete", s.delete},
		{"Mkdir", s.mkdir},
		{"Checksum", s.checksum},
		{"ConcurrentReads", s.concurrentReads},
	}
	if _, ok := tg.Endpoint.(endpoint.ConditionalPutter); ok {
		cases = append(cases, struct {
			name string
			fn   func(t *testing.T)
		}{"PutIf", s.putIf})
	}
	for _, c := range cases {
		t.Run(c.name, c.fn)
	}
	for _, c := range s.namespaceCases() {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	Target
	ep endpoint.Endpoint
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// data returns n deterministic pseudo-random bytes.
func data(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (s *suite) mustPut(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := s.ep.Put(ctxFor(t), p, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("Put(%q, %d bytes) = %v", p, len(b), err)
	}
}

// readAll opens and reads a range, returning the read error too.
func (s *suite) readAll(t *testing.T, p string, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.ep.Open(ctxFor(t), p, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func wantClass(t *testing.T, what string, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s = %v, want an error wrapping %v", what, err, class)
	}
}

func (s *suite) probe(t *testing.T) {
	if err := s.ep.Probe(ctxFor(t)); err != nil {
		t.Fatalf("Probe() = %v, want nil", err)
	}
	if s.ep.Name() == "" {
		t.Errorf("Name() is empty")
	}
}

func (s *suite) stat(t *testing.T) {
	ctx := ctxFor(t)
	b := data(1000, 1)
	s.mustPut(t, "/c-stat/f.bin", b)
	in, err := s.ep.Stat(ctx, "/c-stat/f.bin")
	if err != nil {
		t.Fatalf("Stat(file) = %v", err)
	}
	if in.Name != "f.bin" || in.Size != 1000 || in.IsDir {
		t.Errorf("Stat(file) = %+v, want name f.bin, size 1000, not a dir", in)
	}
	if !s.Caps.NoModTime {
		if d := time.Since(in.ModTime); d < -time.Hour || d > time.Hour {
			t.Errorf("Stat(file).ModTime = %v, want about now", in.ModTime)
		}
	}
	for _, v := range in.Checksums {
		if sums, _, _ := httpx.Sums(bytes.NewReader(b), httpx.Adler32, httpx.MD5, httpx.CRC32C); !slices.Contains([]string{sums["adler32"], sums["md5"], sums["crc32c"]}, v) {
			t.Errorf("Stat(file).Checksums = %v, want values of %v", in.Checksums, sums)
		}
	}
	in, err = s.ep.Stat(ctx, "/c-stat")
	if err != nil || !in.IsDir || in.Name != "c-stat" {
		t.Errorf("Stat(dir) = %+v, %v, want a dir named c-stat", in, err)
	}
	in, err = s.ep.Stat(ctx, "/")
	if err != nil || !in.IsDir {
		t.Errorf("Stat(/) = %+v, %v, want a dir", in, err)
	}
	_, err = s.ep.Stat(ctx, "/c-stat/missing")
	wantClass(t, "Stat(missing)", err, endpoint.ErrNotFound)
	_, err = s.ep.Stat(ctx, "/c-stat-missing/deeper/x")
	wantClass(t, "Stat(missing/deeper)", err, endpoint.ErrNotFound)
}

// names checks names that need escaping on the wire.
func (s *suite) names(t *testing.T) {
	ctx := ctxFor(t)
	names := []string{"with space.txt", "pct%41%zz.txt", "plus+and&amp;=.txt", "unicodé-ü.txt", "semi;colon,comma.txt", "hash#q?.txt"}
	names = slices.DeleteFunc(names, func(n string) bool {
		return s.Caps.BadNameChars != "" && strings.ContainsAny(n, s.Caps.BadNameChars)
	})
	for _, n := range names {
		s.mustPut(t, "/c-names/"+n, []byte(n))
		in, err := s.ep.Stat(ctx, "/c-names/"+n)
		if err != nil || in.Size != int64(len(n)) || in.Name != n {
			t.Errorf("Stat(%q) = %+v, %v, want size %d", n, in, err, len(n))
		}
		got, err := s.readAll(t, "/c-names/"+n, 0, -1)
		if err != nil || string(got) != n {
			t.Errorf("Open(%q) read %q, %v; want %q", n, got, err, n)
		}
	}
	ents, err := s.ep.List(ctx, "/c-names")
	if err != nil {
		t.Fatalf("List = %v", err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name)
	}
	sort.Strings(got)
	want := slices.Clone(names)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("List(/c-names) = %q, want %q", got, want)
	}
}

func (s *suite) list(t *testing.T) {
	ctx := ctxFor(t)
	s.mustPut(t, "/c-list/a", []byte("abc"))
	s.mustPut(t, "/c-list/b.root", []byte("hello"))
	s.mustPut(t, "/c-list/sub/c", []byte("x"))
	if err := s.ep.Mkdir(ctx, "/c-list/empty"); err != nil {
		t.Fatalf("Mkdir = %v", err)
	}
	ents, err := s.ep.List(ctx, "/c-list")
	if err != nil {
		t.Fatalf("List(/c-list) = %v", err)
	}
	got := map[string]endpoint.Info{}
	for _, e := range ents {
		got[e.Name] = e
	}
	want := map[string]struct {
		size int64
		dir  bool
	}{"a": {3, false}, "b.root": {5, false}, "sub": {0, true}, "empty": {0, true}}
	if len(got) != len(want) {
		t.Errorf("List(/c-list) gave %d entries %v, want %d", len(got), ents, len(want))
	}
	for n, w := range want {
		e, ok := got[n]
		if !ok {
			t.Errorf("List(/c-list) lacks %q", n)
			continue
		}
		if e.IsDir != w.dir || (!w.dir && e.Size != w.size) {
			t.Errorf("List(/c-list)[%q] = %+v, want size %d dir %v", n, e, w.size, w.dir)
		}
	}
	ents, err = s.ep.List(ctx, "/c-list/empty")
	if err != nil || len(ents) != 0 {
		t.Errorf("List(empty dir) = %v, %v, want no entries", ents, err)
	}
	root, err := s.ep.List(ctx, "/")
	if err != nil || !slices.ContainsFunc(root, func(e endpoint.Info) bool { return e.Name == "c-list" && e.IsDir }) {
		t.Errorf("List(/) = %v, %v, want it to hold dir c-list", root, err)
	}
	_, err = s.ep.List(ctx, "/c-list-missing")
	wantClass(t, "List(missing)", err, endpoint.ErrNotFound)
	_, err = s.ep.List(ctx, "/c-list/a")
	wantClass(t, "List(file)", err, endpoint.ErrRefused)
}

func (s *suite) read(t *testing.T) {
	const size = 200_000
	b := data(size, 2)
	p := "/c-read/f.bin"
	s.mustPut(t, p, b)
	tests := []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"whole", 0, -1, b},
		{"whole-exact", 0, size, b},
		{"head", 0, 10, b[:10]},
		{"middle", 1000, 5000, b[1000:6000]},
		{"to-eof", 150_000, -1, b[150_000:]},
		{"last-byte", size - 1, 1, b[size-1:]},
		{"past-end-cut", size - 10, 100, b[size-10:]},
		{"at-size", size, -1, nil},
		{"at-size-n", size, 10, nil},
		{"zero-n", 5, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.readAll(t, p, tt.off, tt.n)
			if err != nil {
				t.Fatalf("Open(%d, %d) = %v", tt.off, tt.n, err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Open(%d, %d) gave %d bytes, want %d (equal: %v)", tt.off, tt.n, len(got), len(tt.want), bytes.Equal(got, tt.want))
			}
		})
	}
	for _, n := range []int64{-1, 10} {
		_, err := s.readAll(t, p, size+1, n)
		wantClass(t, fmt.Sprintf("Open(size+1, %d)", n), err, endpoint.ErrRefused)
		wantBeyondEnd(t, fmt.Sprintf("Open(size+1, %d)", n), err)
		_, err = s.readAll(t, p, size+1000, n)
		wantClass(t, fmt.Sprintf("Open(size+1000, %d)", n), err, endpoint.ErrRefused)
		wantBeyondEnd(t, fmt.Sprintf("Open(size+1000, %d)", n), err)
	}
	_, err := s.readAll(t, "/c-read/missing", 0, -1)
	wantClass(t, "Open(missing)", err, endpoint.ErrNotFound)
	_, err = s.readAll(t, "/c-read", 0, -1)
	wantClass(t, "Open(a directory)", err, endpoint.ErrRefused)
	_, err = s.readAll(t, "/c-read/missing", 10, 10)
	wantClass(t, "Open(missing, 10, 10)", err, endpoint.ErrNotFound)
}

func (s *suite) readEmpty(t *testing.T) {
	s.mustPut(t, "/c-read-empty/e", nil)
	in, err := s.ep.Stat(ctxFor(t), "/c-read-empty/e")
	if err != nil || in.Size != 0 || in.IsDir {
		t.Errorf("Stat(empty) = %+v, %v", in, err)
	}
	for _, n := range []int64{-1, 10} {
		got, err := s.readAll(t, "/c-read-empty/e", 0, n)
		if err != nil || len(got) != 0 {
			t.Errorf("Open(empty, 0, %d) = %q, %v, want no bytes", n, got, err)
		}
	}
	_, err = s.readAll(t, "/c-read-empty/e", 1, -1)
	wantClass(t, "Open(empty, 1, -1)", err, endpoint.ErrRefused)
	wantBeyondEnd(t, "Open(empty, 1, -1)", err)
}

// wantBeyondEnd checks that a read past the end says so
// (endpoint.ErrBeyondEnd), as every kind must: a cache that reads within
// the size it saw takes it for a shorter, new version of the file.
func wantBeyondEnd(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, endpoint.ErrBeyondEnd) {
		t.Errorf("%s: %v; want endpoint.ErrBeyondEnd", what, err)
	}
}

// onlyReader hides every method but Read (no Seeker, no WriterTo), the
// way a network stream looks.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func (s *suite) put(t *testing.T) {
	ctx := ctxFor(t)
	big := data(3<<20+17, 3)
	tests := []struct {
		name string
		p    string
		data []byte
		r    func() io.Reader
		size int64
	}{
		{"new", "/c-put/new", []byte("new file"), nil, 8},
		{"replace", "/c-put/new", []byte("new"), nil, 3},
		{"nested-parents", "/c-put/a/b/c/d.bin", data(4096, 4), nil, 4096},
		{"unknown-size-small", "/c-put/u-small", data(1000, 5), nil, -1},
		{"unknown-size-large", "/c-put/u-large", big, func() io.Reader { return onlyReader{bytes.NewReader(big)} }, -1},
		{"large-stream", "/c-put/large", big, func() io.Reader { return onlyReader{bytes.NewReader(big)} }, int64(len(big))},
		{"large-seekable", "/c-put/large-seek", big, nil, int64(len(big))},
		{"empty", "/c-put/empty", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tt.data)
			if tt.r != nil {
				r = tt.r()
			}
			if err := s.ep.Put(ctx, tt.p, r, tt.size); err != nil {
				t.Fatalf("Put(%q, %d) = %v", tt.p, tt.size, err)
			}
			got, err := s.readAll(t, tt.p, 0, -1)
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Errorf("after Put(%q): read %d bytes, %v; want %d bytes equal", tt.p, len(got), err, len(tt.data))
			}
			in, err := s.ep.Stat(ctx, tt.p)
			if err != nil || in.Size != int64(len(tt.data)) {
				t.Errorf("after Put(%q): Stat = %+v, %v; want size %d", tt.p, in, err, len(tt.data))
			}
		})
	}
	if err := s.ep.Mkdir(ctx, "/c-put/dir"); err != nil {
		t.Fatalf("Mkdir = %v", err)
	}
	err := s.ep.Put(ctx, "/c-put/dir", strings.NewReader("x"), 1)
	wantClass(t, "Put(onto a directory)", err, endpoint.ErrRefused)
}

// errReader fails after giving some bytes: a source that breaks.
type errReader struct {
	b   []byte
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.b) == 0 {
		return 0, e.err
	}
	n := copy(p, e.b)
	e.b = e.b[n:]
	return n, nil
}

func (s *suite) putBadSize(t *testing.T) {
	ctx := ctxFor(t)
	s.mustPut(t, "/c-badsize/old", []byte("old content"))
	broken := errors.New("source broke")
	tests := []struct {
		name string
		p    string
		r    io.Reader
		size int64
		// streamed: the failure shows only after bytes went out, so a
		// server that writes in place may keep a partial file.
		streamed bool
	}{
		{"short-new", "/c-badsize/short", strings.NewReader("12345"), 10, false},
		{"long-new", "/c-badsize/long", strings.NewReader("12345678901234"), 10, false},
		{"short-replace", "/c-badsize/old", strings.NewReader("12345"), 10, false},
		{"short-large", "/c-badsize/short-large", onlyReader{bytes.NewReader(data(2<<20, 6))}, 3 << 20, true},
		{"long-large", "/c-badsize/long-large", onlyReader{bytes.NewReader(data(3<<20, 6))}, 2 << 20, true},
		{"broken-large", "/c-badsize/broken-large", &errReader{b: data(2<<20, 7), err: broken}, 3 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.ep.Put(ctx, tt.p, tt.r, tt.size); err == nil {
				t.Errorf("Put(%q) with a wrong size = nil, want an error", tt.p)
			}
			if tt.p == "/c-badsize/old" {
				got, err := s.readAll(t, tt.p, 0, -1)
				if err != nil || string(got) != "old content" {
					t.Errorf("after a failed Put the old file reads %q, %v; want the old content", got, err)
				}
				return
			}
			if tt.streamed && s.Caps.PutNotAtomic {
				return
			}
			if _, err := s.ep.Stat(ctx, tt.p); !errors.Is(err, endpoint.ErrNotFound) {
				t.Errorf("after a failed Put, Stat(%q) = %v, want ErrNotFound", tt.p, err)
			}
		})
	}
}

func (s *suite) delete(t *testing.T) {
	ctx := ctxFor(t)
	s.mustPut(t, "/c-del/f", []byte("x"))
	s.mustPut(t, "/c-del/full/g", []byte("y"))
	if err := s.ep.Mkdir(ctx, "/c-del/empty"); err != nil {
		t.Fatalf("Mkdir = %v", err)
	}
	if err := s.ep.Delete(ctx, "/c-del/f"); err != nil {
		t.Fatalf("Delete(file) = %v", err)
	}
	_, err := s.ep.Stat(ctx, "/c-del/f")
	wantClass(t, "Stat(deleted)", err, endpoint.ErrNotFound)
	err = s.ep.Delete(ctx, "/c-del/f")
	wantClass(t, "Delete(missing)", err, endpoint.ErrNotFound)
	err = s.ep.Delete(ctx, "/c-del-missing/x")
	wantClass(t, "Delete(missing/x)", err, endpoint.ErrNotFound)
	err = s.ep.Delete(ctx, "/c-del/full")
	wantClass(t, "Delete(non-empty dir)", err, endpoint.ErrRefused)
	if got, err := s.readAll(t, "/c-del/full/g", 0, -1); err != nil || string(got) != "y" {
		t.Errorf("after a refused Delete of its dir, the file reads %q, %v", got, err)
	}
	if err := s.ep.Delete(ctx, "/c-del/empty"); err != nil {
		t.Errorf("Delete(empty dir) = %v", err)
	}
	_, err = s.ep.Stat(ctx, "/c-del/empty")
	wantClass(t, "Stat(deleted dir)", err, endpoint.ErrNotFound)
}

func (s *suite) mkdir(t *testing.T) {
	ctx := ctxFor(t)
	if err := s.ep.Mkdir(ctx, "/c-mkdir/a/b/c"); err != nil {
		t.Fatalf("Mkdir(nested) = %v", err)
	}
	for _, p := range []string{"/c-mkdir/a", "/c-mkdir/a/b", "/c-mkdir/a/b/c"} {
		if in, err := s.ep.Stat(ctx, p); err != nil || !in.IsDir {
			t.Errorf("Stat(%q) = %+v, %v, want a dir", p, in, err)
		}
	}
	if err := s.ep.Mkdir(ctx, "/c-mkdir/a/b"); err != nil {
		t.Errorf("Mkdir(existing) = %v, want nil", err)
	}
	if err := s.ep.Mkdir(ctx, "/"); err != nil {
		t.Errorf("Mkdir(/) = %v, want nil", err)
	}
	s.mustPut(t, "/c-mkdir/file", []byte("f"))
	err := s.ep.Mkdir(ctx, "/c-mkdir/file")
	wantClass(t, "Mkdir(onto a file)", err, endpoint.ErrExist)
	wantClass(t, "Mkdir(onto a file)", err, endpoint.ErrRefused)
}

func (s *suite) checksum(t *testing.T) {
	ctx := ctxFor(t)
	b := data(300_000, 8)
	s.mustPut(t, "/c-sum/f", b)
	want, _, err := httpx.Sums(bytes.NewReader(b), httpx.Adler32, httpx.MD5, httpx.CRC32C)
	if err != nil {
		t.Fatal(err)
	}
	for _, algo := range []string{httpx.Adler32, httpx.MD5, httpx.CRC32C} {
		got, err := endpoint.Checksum(ctx, s.ep, "/c-sum/f", algo)
		required := slices.Contains(s.Caps.Checksums, algo)
		switch {
		case err == nil && got != want[algo]:
			t.Errorf("Checksum(%s) = %s, want %s", algo, got, want[algo])
		case err != nil && required:
			t.Errorf("Checksum(%s) = %v, want %s", algo, err, want[algo])
		case err != nil && !errors.Is(err, endpoint.ErrUnsupported):
			t.Errorf("Checksum(%s) = %v, want a value or ErrUnsupported", algo, err)
		}
	}
	if _, ok := s.ep.(endpoint.Checksummer); ok {
		_, err := endpoint.Checksum(ctx, s.ep, "/c-sum/missing", httpx.Adler32)
		if len(s.Caps.Checksums) > 0 {
			wantClass(t, "Checksum(missing)", err, endpoint.ErrNotFound)
		} else if err == nil {
			t.Errorf("Checksum(missing) = nil error")
		}
		_, err = endpoint.Checksum(ctx, s.ep, "/c-sum/f", "sha-512-nope")
		wantClass(t, "Checksum(unknown algorithm)", err, endpoint.ErrUnsupported)
	}
}

func (s *suite) concurrentReads(t *testing.T) {
	const size = 1 << 20
	b := data(size, 9)
	s.mustPut(t, "/c-conc/f", b)
	const workers, reads = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, workers*reads)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for range reads {
				off := r.Int64N(size)
				n := r.Int64N(size-off) + 1
				rc, err := s.ep.Open(context.Background(), "/c-conc/f", off, n)
				if err != nil {
					errs <- fmt.Errorf("Open(%d, %d) = %w", off, n, err)
					continue
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, b[off:off+n]) {
					errs <- fmt.Errorf("Open(%d, %d) read %d bytes, %v; want %d equal", off, n, len(got), err, n)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
