package xrootd

import (
	"context"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
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

	fails("3016", "rm", "/a/b")      // a directory: kXR_isDirectory
	fails("3018", "rmdir", "/a/b")   // not empty: kXR_ItExists
	fails("3005", "rmdir", "/a/b/g") // a file: kXR_FSError, not a directory
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
