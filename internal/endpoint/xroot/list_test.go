package xroot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/testenv"
)

// checkListedAsStat lists dir on e and checks the listing against Stat:
// every file Stat's Info exactly, every directory unsure, and together
// the names wantNames.
func checkListedAsStat(t *testing.T, e *Endpoint, dir string, wantFiles, wantDirs []string) {
	t.Helper()
	ctx := context.Background()
	files, unsure, err := e.StatList(ctx, dir, len(wantFiles)+len(wantDirs))
	if err != nil {
		t.Fatalf("StatList(%q) = %v", dir, err)
	}
	var got []string
	for _, in := range files {
		got = append(got, in.Name)
		st, err := e.Stat(ctx, dir+"/"+in.Name)
		if err != nil {
			t.Fatalf("Stat(%s/%s) = %v", dir, in.Name, err)
		}
		if !reflect.DeepEqual(in, st) {
			t.Errorf("StatList(%q) says %+v, Stat says %+v", dir, in, st)
		}
	}
	slices.Sort(got)
	slices.Sort(unsure)
	slices.Sort(wantFiles)
	slices.Sort(wantDirs)
	if !slices.Equal(got, wantFiles) {
		t.Errorf("StatList(%q) files = %d names (%.80q...), want %d (%.80q...)", dir, len(got), got, len(wantFiles), wantFiles)
	}
	if !slices.Equal(unsure, wantDirs) {
		t.Errorf("StatList(%q) unsure = %q, want the directories %q", dir, unsure, wantDirs)
	}
}

// TestStatListXRootD: a real xrootd's kXR_dstat listing says of each
// file what its kXR_stat says, directories are left to Stat, and a
// listing longer than one kXR_oksofar part (xrootd sends 8 KiB parts)
// comes whole.
func TestStatListXRootD(t *testing.T) {
	x := startXRootD(t)
	x.seed(t, "d/a.root", randomData(1000, 1))
	x.seed(t, "d/empty", nil)
	x.seed(t, "d/sp ace", []byte("x"))
	x.seed(t, "d/sub/x", []byte("x"))
	x.seed(t, "d/sub2/y", []byte("y"))
	if err := os.Symlink("a.root", filepath.Join(x.base, "d", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(x.base, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	var many []string
	long := strings.Repeat("n", 200)
	if err := os.MkdirAll(filepath.Join(x.base, "many"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		n := fmt.Sprintf("%s-%04d.root", long, i)
		many = append(many, n)
		if err := os.WriteFile(filepath.Join(x.base, "many", n), []byte(strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testenv.ChownToXRootD(t, x.base)
	e := x.endpoint(t)
	ctx := context.Background()

	checkListedAsStat(t, e, "/d", []string{"a.root", "empty", "sp ace", "link"}, []string{"sub", "sub2"})
	checkListedAsStat(t, e, "/many", many, nil)
	checkListedAsStat(t, e, "/emptydir", nil, nil)

	if _, _, err := e.StatList(ctx, "/nope", 10); !errors.Is(err, endpoint.ErrNotFound) {
		t.Errorf("StatList(missing) = %v, want ErrNotFound", err)
	}
	if _, _, err := e.StatList(ctx, "/d", 5); !errors.Is(err, endpoint.ErrTooLarge) {
		t.Errorf("StatList(6 entries, limit 5) = %v, want ErrTooLarge", err)
	}
	if _, _, err := e.StatList(ctx, "/many", 2999); !errors.Is(err, endpoint.ErrTooLarge) {
		t.Errorf("StatList(3000 entries, limit 2999) = %v, want ErrTooLarge", err)
	}
	if _, _, err := e.StatList(ctx, "/d/a.root", 10); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("StatList(a file) = %v, want ErrRefused", err)
	}
	// The pool is still usable after the refusals.
	checkListedAsStat(t, e, "/d", []string{"a.root", "empty", "sp ace", "link"}, []string{"sub", "sub2"})
}

// dirlistFake answers kXR_dirlist on a rawFake by writing body in
// kXR_oksofar parts of part bytes, then kXR_ok, or as mode says.
func dirlistFake(mode string, body string, part int) func(c net.Conn, sid [2]byte) error {
	return func(c net.Conn, sid [2]byte) error {
		switch mode {
		case "redirect":
			return answer(c, sid, xrdwire.StatusRedirect, append(binary.BigEndian.AppendUint32(nil, 1094), "127.0.0.1"...))
		case "wait":
			return answer(c, sid, xrdwire.StatusWait, []byte{0, 0, 0, 1})
		case "refuse":
			return answer(c, sid, xrdwire.StatusError, append(binary.BigEndian.AppendUint32(nil, codeNotAuthorized), "no l privilege\x00"...))
		case "endless":
			for {
				if err := answer(c, sid, xrdwire.StatusOKSoFar, []byte(strings.Repeat("f\n1 1 0 1\n", 1000))); err != nil {
					return err
				}
			}
		case "cut":
			// A part, then the header of the next, half its bytes and
			// hang up.
			if err := answer(c, sid, xrdwire.StatusOKSoFar, []byte(body)); err != nil {
				return err
			}
			h := make([]byte, 8)
			copy(h, sid[:])
			binary.BigEndian.PutUint32(h[4:], uint32(len(body)))
			_, _ = c.Write(append(h, body[:len(body)/2]...))
			return errors.New("gone")
		case "cut after part":
			_ = answer(c, sid, xrdwire.StatusOKSoFar, []byte(body))
			return errors.New("gone")
		}
		for len(body) > part {
			if err := answer(c, sid, xrdwire.StatusOKSoFar, []byte(body[:part])); err != nil {
				return err
			}
			body = body[part:]
		}
		return answer(c, sid, xrdwire.StatusOK, []byte(body))
	}
}

// TestStatListFake: answers a listing cannot stand for a Stat of each
// file give ErrUnsupported (the federator then asks Stat); answers that
// are malformed, too long or cut give an error, never a shorter listing.
func TestStatListFake(t *testing.T) {
	good := ".\n0 0 0 0\na\n1 10 16 1700000000\nb\n2 20 16 1700000001 1700000001 1700000001 0644 u g\n" +
		"d\n3 4096 18 1700000002\no\n4 5 20 1700000003\n" + "off\n0 6 16 1700000004\nposc\n5 7 80 1700000005\x00"
	for _, tc := range []struct {
		name, mode, body string
		part             int
		want             error // nil: the good listing
	}{
		{"good", "", good, 1 << 20, nil},
		{"good in parts that split entries", "", good, 7, nil},
		{"good, final part empty", "", strings.TrimSuffix(good, "\x00") + "\n", len(good), nil},
		{"redirect", "redirect", "", 0, endpoint.ErrUnsupported},
		{"wait", "wait", "", 0, endpoint.ErrUnsupported},
		{"not authorized", "refuse", "", 0, endpoint.ErrUnsupported},
		{"no lead-in", "", "a\nb\x00", 1 << 20, endpoint.ErrUnsupported},
		{"no lead-in, empty", "", "", 1 << 20, endpoint.ErrUnsupported},
		{"endless", "endless", "", 0, endpoint.ErrTooLarge},
		{"cut mid-part", "cut", good, 0, endpoint.ErrUnavailable},
		{"cut after a part", "cut after part", good, 0, endpoint.ErrUnavailable},
		{"garbage", "", "\x01\x02garbage", 1 << 20, endpoint.ErrUnavailable},
		{"no stat line", "", ".\n0 0 0 0\na\n1 10 16 1700000000\nb\x00", 1 << 20, endpoint.ErrUnavailable},
		{"bad stat line", "", ".\n0 0 0 0\na\n1 ten 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"short stat line", "", ".\n0 0 0 0\na\n1 10 16\x00", 1 << 20, endpoint.ErrUnavailable},
		{"name with slash", "", ".\n0 0 0 0\n../a\n1 10 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"dot dot", "", ".\n0 0 0 0\n..\n1 10 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"empty name", "", ".\n0 0 0 0\n\n1 10 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"twice", "", ".\n0 0 0 0\na\n1 10 16 1700000000\na\n1 10 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"NUL inside", "", ".\n0 0 0 0\na\x00b\n1 10 16 1700000000\x00", 1 << 20, endpoint.ErrUnavailable},
		{"no end", "", ".\n0 0 0 0\na\n1 10 16 1700000000", 1 << 20, endpoint.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &rawFake{dirlist: dirlistFake(tc.mode, tc.body, tc.part)}
			e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
			files, unsure, err := e.StatList(context.Background(), "/dir", 100)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || files != nil || unsure != nil {
					t.Fatalf("StatList = %d files, %q, %v; want no listing and %v", len(files), unsure, err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("StatList = %v", err)
			}
			want := []endpoint.Info{
				{Name: "a", Size: 10, ModTime: time.Unix(1700000000, 0).UTC()},
				{Name: "b", Size: 20, ModTime: time.Unix(1700000001, 0).UTC()},
			}
			if !reflect.DeepEqual(files, want) {
				t.Errorf("StatList files = %+v, want %+v", files, want)
			}
			if w := []string{"d", "o", "off", "posc"}; !slices.Equal(unsure, w) {
				t.Errorf("StatList unsure = %q, want %q (a directory, a non-file, an offline file, one being written)", unsure, w)
			}
		})
	}
}

// TestStatListRedirectorNotAsked: once a server redirected, its
// listings are not asked for; Stat goes through go-hep.
func TestStatListRedirectorNotAsked(t *testing.T) {
	var asked atomic.Int32
	f := &rawFake{dirlist: func(c net.Conn, sid [2]byte) error {
		asked.Add(1)
		return dirlistFake("redirect", "", 0)(c, sid)
	}}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	for range 2 {
		if _, _, err := e.StatList(context.Background(), "/dir", 100); !errors.Is(err, endpoint.ErrUnsupported) {
			t.Fatalf("StatList of a redirector = %v, want ErrUnsupported", err)
		}
	}
	if n := asked.Load(); n != 1 || !e.noDirect.Load() {
		t.Errorf("a redirector was asked %d listings (want 1), direct requests on: %v", n, !e.noDirect.Load())
	}
}

// TestStatListLoadBalancerNotAsked: a server whose handshake says load
// balancer is never asked for a listing, however good its listing
// would be: its entries may be other copies than its Stat describes.
func TestStatListLoadBalancerNotAsked(t *testing.T) {
	var asked atomic.Int32
	good := dirlistFake("", ".\n0 0 0 0\na\n1 10 16 1700000000\x00", 1<<20)
	f := &rawFake{lbal: true, dirlist: func(c net.Conn, sid [2]byte) error {
		asked.Add(1)
		return good(c, sid)
	}}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	for range 2 {
		if files, _, err := e.StatList(context.Background(), "/dir", 100); !errors.Is(err, endpoint.ErrUnsupported) || files != nil {
			t.Fatalf("StatList of a load balancer = %d files, %v; want ErrUnsupported", len(files), err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("a load balancer was asked %d listings, want 0", n)
	}
}

// TestStatListEndlessClosesConnection: a listing cut at the byte bound
// leaves its connection mid-answer; it is closed, not pooled.
func TestStatListEndlessClosesConnection(t *testing.T) {
	f := &rawFake{dirlist: dirlistFake("endless", "", 0)}
	e := newEndpoint(t, "root://"+startRawFake(t, f)+"//", 5*time.Second)
	if _, _, err := e.StatList(context.Background(), "/dir", 10); !errors.Is(err, endpoint.ErrTooLarge) {
		t.Fatalf("StatList = %v, want ErrTooLarge", err)
	}
	if n := e.pool.idle.Idle(); n != 0 {
		t.Errorf("%d idle connections after a listing cut short, want 0", n)
	}
}
