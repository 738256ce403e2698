package xrootd

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go-hep.org/x/hep/xrootd/xrdproto/mv"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/testenv"
)

// posixNS serves a local directory through the door: a posix endpoint,
// whose kind has every namespace power (rename, truncate, chmod,
// statfs, and the mode, owner and times of its files).
type posixNS struct{ *posix.Endpoint }

func (posixNS) Replicas(context.Context, string) ([]*url.URL, error) { return nil, nil }

func startPosixDoor(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	ep, err := posix.New(context.Background(), endpoint.Config{Name: "disk", URL: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := startDoor(t, posixNS{ep}, Options{})
	return dir, addr
}

// Every xrdfs namespace command works through the door, and each result
// is checked on the disk the namespace is: mkdir (-p), rm, rmdir (a
// directory with entries refused as XRootD refuses it, a missing one
// kXR_NotFound), mv of a file and of a directory, truncate, chmod;
// stat and ls -l carry mode, owner, group, ctime and atime; spaceinfo,
// query space and query stats answer as xrootd's do.
func TestXrdfsNamespace(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	dir, addr := startPosixDoor(t)
	on := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	xfs := func(args ...string) (string, error) {
		return run(t, nil, xrdfs, append([]string{"root://" + addr}, args...)...)
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := xfs(args...)
		if err != nil {
			t.Fatalf("xrdfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(code string, args ...string) {
		t.Helper()
		out, err := xfs(args...)
		if err == nil || !strings.Contains(out, "["+code+"]") {
			t.Errorf("xrdfs %s = %v\n%s\nwant error [%s]", strings.Join(args, " "), err, out, code)
		}
	}
	isDir := func(p string) bool { fi, err := os.Stat(on(p)); return err == nil && fi.IsDir() }
	missing := func(p string) bool { _, err := os.Lstat(on(p)); return os.IsNotExist(err) }

	ok("mkdir", "-p", "/a/b/c")
	if !isDir("/a/b/c") {
		t.Fatalf("xrdfs mkdir -p /a/b/c: no directory on disk")
	}
	fails("3018", "mkdir", "/a/b")   // exists, no -p: kXR_ItExists
	fails("3011", "mkdir", "/x/y/z") // parent missing, no -p: kXR_NotFound
	if !missing("/x") {
		t.Errorf("a refused mkdir made /x")
	}
	ok("mkdir", "/a/new")
	if !isDir("/a/new") {
		t.Errorf("xrdfs mkdir /a/new: no directory on disk")
	}

	if err := os.WriteFile(on("/a/f"), []byte("0123456789"), 0o640); err != nil {
		t.Fatal(err)
	}
	me, _ := user.Current()
	out := ok("stat", "/a/f")
	for _, want := range []string{"Size:   10", "Mode:   0640", "Owner:  " + me.Username, "CTime:", "ATime:"} {
		if !strings.Contains(out, want) {
			t.Errorf("xrdfs stat /a/f lacks %q:\n%s", want, out)
		}
	}
	out = ok("ls", "-l", "/a")
	if !regexp.MustCompile(`(?m)^-rw-r----- \S+ \S+ +10 .*/a/f$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^drwx`).MatchString(out) {
		t.Errorf("xrdfs ls -l /a shows no modes:\n%s", out)
	}

	ok("mv", "/a/f", "/a/b/g")
	if !missing("/a/f") || missing("/a/b/g") {
		t.Errorf("xrdfs mv /a/f /a/b/g: on disk /a/f missing %v, /a/b/g missing %v", missing("/a/f"), missing("/a/b/g"))
	}
	ok("truncate", "/a/b/g", "4")
	if b, _ := os.ReadFile(on("/a/b/g")); string(b) != "0123" {
		t.Errorf("xrdfs truncate /a/b/g 4: the file holds %q", b)
	}
	ok("chmod", "/a/b/g", "rwxr-x---")
	if fi, err := os.Stat(on("/a/b/g")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("xrdfs chmod rwxr-x---: mode on disk %v, %v", fi.Mode(), err)
	}

	fails("3016", "truncate", "/a/b", "0") // a directory: kXR_isDirectory
	fails("3016", "rm", "/a/b")            // a directory: kXR_isDirectory
	fails("3018", "rmdir", "/a/b")         // not empty: kXR_ItExists
	fails("3005", "rmdir", "/a/b/g")       // a file: kXR_FSError, not a directory
	fails("3011", "rmdir", "/a/none")
	if !isDir("/a/b") || missing("/a/b/g") {
		t.Errorf("a refused rm or rmdir removed something")
	}
	ok("mv", "/a/b", "/moved")
	if !missing("/a/b") || missing("/moved/g") || !isDir("/moved/c") {
		t.Errorf("xrdfs mv /a/b /moved: the directory did not move on disk")
	}
	ok("rm", "/moved/g")
	ok("rmdir", "/moved/c")
	if !missing("/moved/g") || !missing("/moved/c") {
		t.Errorf("xrdfs rm, rmdir: still on disk")
	}
	fails("3011", "rm", "/moved/g")

	out = ok("spaceinfo", "/")
	m := regexp.MustCompile(`Total:\s+(\d+)`).FindStringSubmatch(out)
	if total, _ := strconv.ParseInt(append(m, "", "")[1], 10, 64); total <= 0 || !strings.Contains(out, "Free:") {
		t.Errorf("xrdfs spaceinfo /:\n%s", out)
	}
	out = ok("query", "space", "/")
	if !regexp.MustCompile(`oss.space=[1-9]\d*&oss.free=\d+`).MatchString(out) {
		t.Errorf("xrdfs query space /: %s", out)
	}
	out = ok("query", "stats", "a")
	for _, want := range []string{"<statistics ", `<stats id="xrootd">`, "<rdr>", `<stats id="link">`} {
		if !strings.Contains(out, want) {
			t.Errorf("xrdfs query stats a lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`<misc>[1-9]\d*</misc>`).MatchString(out) {
		t.Errorf("xrdfs query stats a counts no namespace requests (misc):\n%s", out)
	}
}

// Each namespace request asks Authorize for the action HTTP's auth
// middleware asks for the same change, and a refusal is
// kXR_NotAuthorized with nothing changed on disk.
func TestNamespaceAuthorize(t *testing.T) {
	dir := t.TempDir()
	ep, err := posix.New(context.Background(), endpoint.Config{Name: "disk", URL: "file://" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	deny := map[string]bool{}
	authorize := func(_ context.Context, _, act, p string) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, act+" "+p)
		if deny[act] {
			return fmt.Errorf("no %s for you", act)
		}
		return nil
	}
	_, addr := startDoor(t, posixNS{ep}, Options{Authorize: authorize})
	for _, f := range []string{"f", "t", "c"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0123456789"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	r := dialRaw(t, addr)
	mv := func(from, to string) (int, []byte) {
		params := make([]byte, 16)
		binary.BigEndian.PutUint16(params[14:], uint16(len(from)))
		return r.answer(r.request(mv.RequestID, params, []byte(from+" "+to)))
	}
	withU16 := func(off int, v uint16) []byte {
		params := make([]byte, 16)
		binary.BigEndian.PutUint16(params[off:], v)
		return params
	}
	trunc := make([]byte, 16)
	binary.BigEndian.PutUint64(trunc[4:], 3)
	cases := []struct {
		name string
		do   func() (int, []byte)
		want []string // the actions asked, in order
		deny string   // refused action: the request must fail, nothing changes
		kept string   // a path that must still be there after a refusal
		gone string   // and one that must not be there
	}{
		{"mkdir", func() (int, []byte) { return r.answer(r.request(3008, withU16(0, 0x0100), []byte("/new"))) }, []string{"create /new"}, "create", "/f", "/new"},
		{"truncate", func() (int, []byte) { return r.answer(r.request(3028, trunc, []byte("/t"))) }, []string{"modify /t"}, "modify", "/t", "/x"},
		{"chmod", func() (int, []byte) { return r.answer(r.request(3002, withU16(14, 0o600), []byte("/c"))) }, []string{"modify /c"}, "modify", "/c", "/x"},
		{"rm", func() (int, []byte) { return r.answer(r.request(3014, pathParams(), []byte("/f"))) }, []string{"delete /f"}, "delete", "/f", "/x"},
		{"rmdir", func() (int, []byte) { return r.answer(r.request(3015, pathParams(), []byte("/d"))) }, []string{"delete /d"}, "delete", "/d", "/x"},
		{"mv", func() (int, []byte) { return mv("/t", "/moved") }, []string{"modify /t", "delete /t", "create /moved"}, "delete", "/t", "/moved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			asked, deny = nil, map[string]bool{c.deny: true}
			mu.Unlock()
			st, body := c.do()
			se := xrdwire.ParseError(body)
			if st != 4003 || se.Code != 3010 {
				t.Errorf("%s with %s refused: status %d, error %d %q; want kXR_NotAuthorized", c.name, c.deny, st, se.Code, se.Message)
			}
			if _, err := os.Lstat(filepath.Join(dir, c.kept)); err != nil {
				t.Errorf("a refused %s changed %s: %v", c.name, c.kept, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, c.gone)); err == nil {
				t.Errorf("a refused %s made %s", c.name, c.gone)
			}
			mu.Lock()
			asked, deny = nil, map[string]bool{}
			mu.Unlock()
			if st, body := c.do(); st != 0 {
				t.Fatalf("%s allowed: status %d %q", c.name, st, body)
			}
			mu.Lock()
			got := slices.Clone(asked)
			mu.Unlock()
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("%s asked Authorize %q, want %q among them", c.name, got, w)
				}
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "moved")); string(b) != "012" {
		t.Errorf("after truncate 3 and mv, /moved holds %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dir, "c")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after chmod 0600, /c: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "new")); err != nil || !fi.IsDir() {
		t.Errorf("after mkdir, /new: %v", err)
	}
}
