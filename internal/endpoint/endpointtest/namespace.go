package endpointtest

import (
	"bytes"
	"errors"
	"io/fs"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// namespaceCases are the cases of the optional namespace powers
// (endpoint/namespace.go): each runs only when the kind has the power,
// and holds it to its contract.
func (s *suite) namespaceCases() []testCase {
	return []testCase{
		{"DeleteNotEmpty", s.deleteNotEmpty},
		{"Rename", s.rename},
		{"RenameDir", s.renameDir},
		{"Truncate", s.truncate},
		{"Chmod", s.chmod},
		{"Space", s.space},
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T)
}

// deleteNotEmpty: a directory with entries is refused with ErrNotEmpty,
// so a door can answer what XRootD answers for it.
func (s *suite) deleteNotEmpty(t *testing.T) {
	ctx := ctxFor(t)
	s.mustPut(t, "/c-notempty/d/f", []byte("x"))
	err := s.ep.Delete(ctx, "/c-notempty/d")
	wantClass(t, "Delete(non-empty dir)", err, endpoint.ErrNotEmpty)
	wantClass(t, "Delete(non-empty dir)", err, endpoint.ErrRefused)
}

func (s *suite) renamer(t *testing.T) endpoint.Renamer {
	r, ok := s.ep.(endpoint.Renamer)
	if !ok {
		err := endpoint.Rename(ctxFor(t), s.ep, "/a", "/b")
		wantClass(t, "endpoint.Rename on a kind without Renamer", err, endpoint.ErrUnsupported)
		t.Skip("the kind has no rename")
	}
	return r
}

func (s *suite) rename(t *testing.T) {
	r := s.renamer(t)
	ctx := ctxFor(t)
	a, b := data(5000, 21), data(7000, 22)
	s.mustPut(t, "/c-mv/a", a)
	s.mustPut(t, "/c-mv/b", b)
	if err := s.ep.Mkdir(ctx, "/c-mv/dir"); err != nil {
		t.Fatal(err)
	}

	// To a new name in a directory that does not exist yet.
	if err := r.Rename(ctx, "/c-mv/a", "/c-mv/new/sub/a2"); err != nil {
		t.Fatalf("Rename(a, new/sub/a2) = %v", err)
	}
	_, err := s.ep.Stat(ctx, "/c-mv/a")
	wantClass(t, "Stat(renamed from)", err, endpoint.ErrNotFound)
	if got, err := s.readAll(t, "/c-mv/new/sub/a2", 0, -1); err != nil || !bytes.Equal(got, a) {
		t.Fatalf("renamed file reads %d bytes, %v; want the %d of a", len(got), err, len(a))
	}

	// Onto a file: replaced.
	if err := r.Rename(ctx, "/c-mv/new/sub/a2", "/c-mv/b"); err != nil {
		t.Fatalf("Rename(a2, b) over a file = %v", err)
	}
	if got, err := s.readAll(t, "/c-mv/b", 0, -1); err != nil || !bytes.Equal(got, a) {
		t.Errorf("b after a rename over it reads %d bytes, %v; want a's %d", len(got), err, len(a))
	}

	// Onto a directory: refused, nothing changed.
	err = r.Rename(ctx, "/c-mv/b", "/c-mv/dir")
	wantClass(t, "Rename(file onto a dir)", err, endpoint.ErrExist)
	if in, err := s.ep.Stat(ctx, "/c-mv/dir"); err != nil || !in.IsDir {
		t.Errorf("dir after a refused rename onto it: %+v, %v", in, err)
	}
	if got, err := s.readAll(t, "/c-mv/b", 0, -1); err != nil || !bytes.Equal(got, a) {
		t.Errorf("b after a refused rename reads %d bytes, %v", len(got), err)
	}

	err = r.Rename(ctx, "/c-mv/missing", "/c-mv/x")
	wantClass(t, "Rename(missing)", err, endpoint.ErrNotFound)
}

func (s *suite) renameDir(t *testing.T) {
	r := s.renamer(t)
	ctx := ctxFor(t)
	f := data(3000, 23)
	s.mustPut(t, "/c-mvdir/d/sub/f", f)
	s.mustPut(t, "/c-mvdir/file", []byte("in the way"))

	err := r.Rename(ctx, "/c-mvdir/d", "/c-mvdir/d/sub/inside")
	wantClass(t, "Rename(dir into itself)", err, endpoint.ErrRefused)
	err = r.Rename(ctx, "/c-mvdir/d", "/c-mvdir/file")
	wantClass(t, "Rename(dir onto a file)", err, endpoint.ErrExist)

	if err := r.Rename(ctx, "/c-mvdir/d", "/c-mvdir/e"); err != nil {
		t.Fatalf("Rename(d, e) = %v", err)
	}
	if got, err := s.readAll(t, "/c-mvdir/e/sub/f", 0, -1); err != nil || !bytes.Equal(got, f) {
		t.Errorf("e/sub/f after the rename reads %d bytes, %v", len(got), err)
	}
	_, err = s.ep.Stat(ctx, "/c-mvdir/d")
	wantClass(t, "Stat(renamed dir)", err, endpoint.ErrNotFound)
	if got, err := s.readAll(t, "/c-mvdir/file", 0, -1); err != nil || string(got) != "in the way" {
		t.Errorf("the file a refused rename aimed at reads %q, %v", got, err)
	}
}

func (s *suite) truncate(t *testing.T) {
	tr, ok := s.ep.(endpoint.Truncater)
	if !ok {
		err := endpoint.Truncate(ctxFor(t), s.ep, "/a", 0)
		wantClass(t, "endpoint.Truncate on a kind without Truncater", err, endpoint.ErrUnsupported)
		t.Skip("the kind has no truncate")
	}
	ctx := ctxFor(t)
	b := data(4000, 24)
	s.mustPut(t, "/c-trunc/f", b)
	if err := tr.Truncate(ctx, "/c-trunc/f", 1000); err != nil {
		t.Fatalf("Truncate(f, 1000) = %v", err)
	}
	if got, err := s.readAll(t, "/c-trunc/f", 0, -1); err != nil || !bytes.Equal(got, b[:1000]) {
		t.Errorf("after Truncate(1000) the file reads %d bytes, %v; want its first 1000", len(got), err)
	}
	if err := tr.Truncate(ctx, "/c-trunc/f", 1500); err != nil {
		t.Fatalf("Truncate(f, 1500) = %v", err)
	}
	want := append(append([]byte{}, b[:1000]...), make([]byte, 500)...)
	if got, err := s.readAll(t, "/c-trunc/f", 0, -1); err != nil || !bytes.Equal(got, want) {
		t.Errorf("after Truncate(1500) the file reads %d bytes, %v; want 1000 bytes and 500 zeros", len(got), err)
	}
	wantClass(t, "Truncate(dir)", tr.Truncate(ctx, "/c-trunc", 0), endpoint.ErrRefused)
	wantClass(t, "Truncate(missing)", tr.Truncate(ctx, "/c-trunc/missing", 0), endpoint.ErrNotFound)
	wantClass(t, "Truncate(negative)", tr.Truncate(ctx, "/c-trunc/f", -1), endpoint.ErrRefused)
}

func (s *suite) chmod(t *testing.T) {
	c, ok := s.ep.(endpoint.Chmoder)
	if !ok {
		err := endpoint.Chmod(ctxFor(t), s.ep, "/a", 0o600)
		wantClass(t, "endpoint.Chmod on a kind without Chmoder", err, endpoint.ErrUnsupported)
		t.Skip("the kind has no chmod")
	}
	ctx := ctxFor(t)
	s.mustPut(t, "/c-chmod/f", []byte("mode"))
	for _, mode := range []fs.FileMode{0o600, 0o640} {
		if err := c.Chmod(ctx, "/c-chmod/f", mode); err != nil {
			t.Fatalf("Chmod(f, %o) = %v", mode, err)
		}
		in, err := s.ep.Stat(ctx, "/c-chmod/f")
		if err != nil {
			t.Fatal(err)
		}
		if in.Mode != 0 && in.Mode != mode {
			t.Errorf("after Chmod(%o) Stat says mode %o", mode, in.Mode)
		}
	}
	if got, err := s.readAll(t, "/c-chmod/f", 0, -1); err != nil || string(got) != "mode" {
		t.Errorf("after Chmod the file reads %q, %v", got, err)
	}
	wantClass(t, "Chmod(missing)", c.Chmod(ctx, "/c-chmod/missing", 0o644), endpoint.ErrNotFound)
}

func (s *suite) space(t *testing.T) {
	sr, ok := s.ep.(endpoint.SpaceReporter)
	if !ok {
		_, err := endpoint.SpaceOf(ctxFor(t), s.ep, "/")
		wantClass(t, "endpoint.SpaceOf on a kind without SpaceReporter", err, endpoint.ErrUnsupported)
		t.Skip("the kind cannot tell its capacity")
	}
	sp, err := sr.Space(ctxFor(t), "/")
	if s.Caps.NoSpace {
		wantClass(t, "Space(/) on a server without capacity reports", err, endpoint.ErrUnsupported)
		return
	}
	if err != nil {
		t.Fatalf("Space(/) = %v", err)
	}
	if sp.Total <= 0 || sp.Free < 0 || sp.Free > sp.Total || sp.Used < 0 || sp.Used > sp.Total || sp.LargestFree > sp.Total {
		t.Errorf("Space(/) = %+v: want 0 <= free, used <= total > 0", sp)
	}
	if _, err := sr.Space(ctxFor(t), "/c-space-missing/x"); err != nil && !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("Space(missing path) = %v, want the space of the store or ErrNotFound", err)
	}
}
