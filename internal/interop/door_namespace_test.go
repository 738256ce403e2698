package interop

// The root:// door's namespace commands with the real clients (xrdfs,
// xrdcp, the XRootD Python bindings, gfal2 over root://) against a
// federation of four kinds of site, each in its own part of the
// namespace: a lakefed storage site (/site, with a second, read-only
// one beside it), nginx WebDAV (/nginx), S3 (/s3) and an XRootD data
// server (/xrd). Every result is checked on the site itself: the file or
// directory on its disk, or the object in the bucket.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// doorSite is one site of the test federation: its prefix, its kind as
// the door names it in a refusal, what its kind can do, and how to look
// at a path on it (relative to its root) without lakefed.
type doorSite struct {
	prefix  string
	kind    string
	rename  bool // Renamer
	inPlace bool // Truncater and Chmoder
	space   bool // reports its capacity
	root    bool // a root:// server: locate names it, not the door
	look    func(rel string) (endpoint.Info, error)
}

// onDisk looks at rel under dir.
func onDisk(dir string) func(string) (endpoint.Info, error) {
	return func(rel string) (endpoint.Info, error) {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			return endpoint.Info{}, endpoint.ErrNotFound
		}
		if err != nil {
			return endpoint.Info{}, err
		}
		return endpoint.Info{Size: fi.Size(), IsDir: fi.IsDir(), Mode: fi.Mode().Perm()}, nil
	}
}

const doorPyScript = `import sys
from XRootD import client
from XRootD.client.flags import MkDirFlags, AccessMode
fs = client.FileSystem(sys.argv[1])
base = sys.argv[2]
def say(what, r):
    st = r[0]
    print(what, "ok" if st.ok else "error %d %s" % (st.errno, st.message.strip().splitlines()[0]))
say("mkdir", fs.mkdir(base + "/py/a/b", MkDirFlags.MAKEPATH))
say("mv", fs.mv(base + "/py.src", base + "/py/a/moved"))
say("truncate", fs.truncate(base + "/py/a/moved", 3))
say("chmod", fs.chmod(base + "/py/a/moved", AccessMode.UR | AccessMode.UW))
st, info = fs.stat(base + "/py/a/moved")
print("stat", info.size if st.ok else "error")
say("rmdir-full", fs.rmdir(base + "/py/a"))
say("rm", fs.rm(base + "/py/a/moved"))
say("rmdir-b", fs.rmdir(base + "/py/a/b"))
say("rmdir-a", fs.rmdir(base + "/py/a"))
`

func TestDoorNamespace(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	xrdcp := testenv.Require(t, "xrdcp")
	py := testenv.Require(t, "python3")
	if out, err := tryRun(nil, py, "-c", "from XRootD import client"); err != nil {
		testenv.Missing(t, "python3 XRootD bindings: "+err.Error()+": "+out)
	}
	ng := testenv.StartNginx(t)
	xrd := testenv.StartXRootD(t)
	s3srv := testenv.StartS3(t)
	s3ep := newEndpoint(t, "s3", s3Yaml(s3srv))
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
		c.Federation.MetadataCache.NegativeTTL = config.Duration(time.Millisecond)
		eps := c.Federation.Endpoints
		eps[0].Prefix = "/site"
		eps[1].Prefix, eps[1].Writable = "/site", false // a read-only copy of some files
		c.Federation.Endpoints = append(eps,
			config.Endpoint{Config: endpoint.Config{Name: "nginx", URL: ng.URL, Timeout: 5 * time.Second}, Prefix: "/nginx", Writable: true},
			config.Endpoint{Config: endpoint.Config{Name: "xrootd", URL: xrd.RootURL + "/", Timeout: 5 * time.Second}, Prefix: "/xrd", Writable: true},
			config.Endpoint{Config: endpoint.Config{Name: "s3", URL: "s3://" + s3srv.Bucket + "/", Timeout: 5 * time.Second,
				S3: &endpoint.S3Config{Endpoint: s3srv.URL, Region: s3srv.Region, AccessKey: s3srv.AccessKey,
					SecretKey: s3srv.SecretKey, PathStyle: true}}, Prefix: "/s3", Writable: true})
	}})
	door := fed.Server.XrootURL()
	doorAddr := strings.TrimPrefix(door, "root://")
	xrdAddr := strings.TrimSuffix(strings.TrimPrefix(xrd.RootURL, "root://"), "/")
	sites := []doorSite{
		{prefix: "/site", kind: "http", rename: true, space: true, look: onDisk(fed.Sites[0].Dir)},
		{prefix: "/nginx", kind: "http", rename: true, look: onDisk(ng.Dir)},
		{prefix: "/xrd", kind: "xroot", rename: true, inPlace: true, space: true, root: true, look: onDisk(xrd.Dir)},
		{prefix: "/s3", kind: "s3", look: func(rel string) (endpoint.Info, error) { return s3ep.Stat(t.Context(), rel) }},
	}
	xfs := func(args ...string) (string, error) {
		return tryRun(doorEnv, xrdfs, append([]string{door}, args...)...)
	}
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := xfs(args...)
		if err != nil {
			t.Fatalf("xrdfs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	refused := func(t *testing.T, code, why string, args ...string) {
		t.Helper()
		out, err := xfs(args...)
		if err == nil || !strings.Contains(out, "["+code+"]") || !strings.Contains(out, why) {
			t.Errorf("xrdfs %s = %v\n%s\nwant [%s] saying %q", strings.Join(args, " "), err, out, code, why)
		}
	}
	src := filepath.Join(t.TempDir(), "src")
	body := []byte("0123456789 the door's namespace")
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, s := range sites {
		t.Run(strings.TrimPrefix(s.prefix, "/"), func(t *testing.T) {
			has := func(rel string) (endpoint.Info, bool) {
				in, err := s.look(rel)
				if err != nil && !errors.Is(err, endpoint.ErrNotFound) {
					t.Fatalf("look at %s%s on the site: %v", s.prefix, rel, err)
				}
				return in, err == nil
			}
			p := func(rel string) string { return s.prefix + rel }

			ok(t, "mkdir", "-p", p("/t/a/b/c"))
			if in, found := has("/t/a/b/c"); !found || !in.IsDir {
				t.Fatalf("xrdfs mkdir -p %s: no directory on the site", p("/t/a/b/c"))
			}
			run(t, doorEnv, xrdcp, "-s", src, door+"/"+p("/t/a/f"))
			if in, found := has("/t/a/f"); !found || in.Size != int64(len(body)) {
				t.Fatalf("xrdcp to %s: the site has %+v, %v", p("/t/a/f"), in, found)
			}
			out := ok(t, "stat", p("/t/a/f"))
			if !strings.Contains(out, fmt.Sprintf("Size:   %d", len(body))) || !regexp.MustCompile(`Mode:\s+0[0-7]{3}`).MatchString(out) ||
				!strings.Contains(out, "CTime:") || !strings.Contains(out, "Owner:") {
				t.Errorf("xrdfs stat %s: no size, mode, ctime or owner:\n%s", p("/t/a/f"), out)
			}
			out = ok(t, "ls", "-l", p("/t/a"))
			if !regexp.MustCompile(`(?m)^-r[-w][-x]\S* .*` + regexp.QuoteMeta(p("/t/a/f")) + `$`).MatchString(out) {
				t.Errorf("xrdfs ls -l %s shows no mode:\n%s", p("/t/a"), out)
			}
			where := doorAddr
			if s.root {
				where = xrdAddr
			}
			out = ok(t, "locate", "-r", p("/t/a/f"))
			if !regexp.MustCompile(regexp.QuoteMeta(where) + `\s+Server\s+ReadWrite`).MatchString(out) {
				t.Errorf("xrdfs locate -r %s = %q, want %s ReadWrite", p("/t/a/f"), out, where)
			}

			name := "/t/a/f" // the file, wherever the renames leave it
			if s.rename {
				ok(t, "mv", p("/t/a/f"), p("/t/a/g"))
				if _, found := has("/t/a/f"); found {
					t.Errorf("after mv the site still has %s", p("/t/a/f"))
				}
				if in, found := has("/t/a/g"); !found || in.Size != int64(len(body)) {
					t.Errorf("after mv the site has %s: %+v, %v", p("/t/a/g"), in, found)
				}
				name = "/t/a/g"
				ok(t, "mv", p("/t/a/b"), p("/t/b2"))
				if _, found := has("/t/a/b"); found {
					t.Errorf("after mv of a directory the site still has %s", p("/t/a/b"))
				}
				if in, found := has("/t/b2/c"); !found || !in.IsDir {
					t.Errorf("after mv of a directory the site has no %s", p("/t/b2/c"))
				}
			} else {
				refused(t, "3013", "kind "+s.kind, "mv", p("/t/a/f"), p("/t/a/g"))
				refused(t, "3013", "kind "+s.kind, "mv", p("/t/a/b"), p("/t/b2"))
				if _, found := has("/t/a/f"); !found {
					t.Errorf("a refused mv removed %s from the site", p("/t/a/f"))
				}
			}
			if s.inPlace {
				ok(t, "truncate", p(name), "5")
				ok(t, "chmod", p(name), "rwx------")
				if in, _ := has(name); in.Size != 5 || in.Mode != 0o700 {
					t.Errorf("after truncate 5 and chmod rwx------ the site has %s of %d bytes, mode %o", p(name), in.Size, in.Mode)
				}
			} else {
				refused(t, "3013", "kind "+s.kind, "truncate", p(name), "5")
				refused(t, "3013", "kind "+s.kind, "chmod", p(name), "rwx------")
				if in, _ := has(name); in.Size != int64(len(body)) {
					t.Errorf("a refused truncate changed %s on the site: %d bytes", p(name), in.Size)
				}
			}

			refused(t, "3018", "not empty", "rmdir", p("/t/a"))
			refused(t, "3016", "is a directory", "rm", p("/t/a"))
			if _, found := has(name); !found {
				t.Fatalf("a refused rmdir or rm removed %s", p(name))
			}
			ok(t, "rm", p(name))
			if _, found := has(name); found {
				t.Errorf("after rm the site still has %s", p(name))
			}
			refused(t, "3011", "", "rm", p(name))
			for _, d := range []string{"/t/b2/c", "/t/b2", "/t/a/b/c", "/t/a/b", "/t/a", "/t"} {
				if _, found := has(d); !found {
					continue // moved away
				}
				ok(t, "rmdir", p(d))
				if _, found := has(d); found {
					t.Errorf("after rmdir the site still has %s", p(d))
				}
			}
			refused(t, "3011", "", "rmdir", p("/t"))

			out, err := xfs("spaceinfo", s.prefix)
			switch {
			case s.space && (err != nil || !regexp.MustCompile(`Total:\s+[1-9]`).MatchString(out)):
				t.Errorf("xrdfs spaceinfo %s = %v\n%s\nwant a total", s.prefix, err, out)
			case !s.space && (err == nil || !strings.Contains(out, "capacity")):
				t.Errorf("xrdfs spaceinfo %s = %v\n%s\nwant a refusal saying no endpoint reports its capacity", s.prefix, err, out)
			}

			// The Python bindings: every operation, results on the site.
			run(t, doorEnv, xrdcp, "-s", src, door+"/"+p("/py.src"))
			got := run(t, doorEnv, py, "-c", doorPyScript, door, s.prefix)
			want := map[string]string{"mkdir": "ok", "mv": "ok", "truncate": "ok", "chmod": "ok", "stat": "3",
				"rmdir-full": "error 3018", "rm": "ok", "rmdir-b": "ok", "rmdir-a": "ok"}
			switch {
			case !s.rename: // the mv is refused: nothing to truncate, chmod or rm
				want["mv"], want["truncate"], want["chmod"], want["stat"], want["rm"] = "error 3013", "error 3011", "error 3011", "error", "error 3011"
			case !s.inPlace:
				want["truncate"], want["chmod"], want["stat"] = "error 3013", "error 3013", fmt.Sprint(len(body))
			}
			for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
				op, res, _ := strings.Cut(line, " ")
				if w, known := want[op]; !known || !strings.HasPrefix(res, w) {
					t.Errorf("python %s: %q, want %q", op, res, w)
				}
			}
			if _, found := has("/py/a"); found {
				t.Errorf("after the Python rmdirs the site still has %s", p("/py/a"))
			}
			if !s.rename {
				if _, found := has("/py.src"); !found {
					t.Errorf("the refused Python mv removed %s", p("/py.src"))
				}
			}
		})
	}

	t.Run("refused moves", func(t *testing.T) {
		a, b := fed.Sites[0].Dir, fed.Sites[1].Dir
		writeUnder(t, a, "/both", []byte("a copy"))
		writeUnder(t, b, "/both", []byte("a copy"))
		writeUnder(t, a, "/alone", []byte("alone"))
		refused(t, "3013", "all-or-nothing", "mv", "/site/both", "/site/both2")
		refused(t, "3013", "copy and a delete", "mv", "/site/alone", "/nginx/alone")
		for _, c := range []struct{ dir, p string }{{a, "/both"}, {b, "/both"}, {a, "/alone"}} {
			if _, err := os.Stat(filepath.Join(c.dir, c.p)); err != nil {
				t.Errorf("a refused mv removed %s: %v", c.p, err)
			}
		}
		if _, err := os.Stat(filepath.Join(ng.Dir, "alone")); err == nil {
			t.Errorf("a refused mv made /nginx/alone")
		}
	})

	t.Run("gfal2", func(t *testing.T) {
		mkdir := testenv.Require(t, "gfal-mkdir")
		rename := testenv.Require(t, "gfal-rename")
		rm := testenv.Require(t, "gfal-rm")
		dir := fed.Sites[0].Dir
		run(t, doorEnv, mkdir, "-p", door+"//site/g/x/y")
		if fi, err := os.Stat(filepath.Join(dir, "g", "x", "y")); err != nil || !fi.IsDir() {
			t.Fatalf("gfal-mkdir -p: no directory on the site: %v", err)
		}
		writeUnder(t, dir, "/g/x/f", []byte("gfal"))
		run(t, doorEnv, rename, door+"//site/g/x/f", door+"//site/g/renamed")
		if _, err := os.Stat(filepath.Join(dir, "g", "x", "f")); err == nil {
			t.Errorf("gfal-rename: the source is still on the site")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "g", "renamed")); err != nil || string(b) != "gfal" {
			t.Errorf("gfal-rename: the site has %q, %v", b, err)
		}
		run(t, doorEnv, rm, door+"//site/g/renamed")
		if _, err := os.Stat(filepath.Join(dir, "g", "renamed")); err == nil {
			t.Errorf("gfal-rm: the file is still on the site")
		}
		run(t, doorEnv, rm, "-r", door+"//site/g")
		if _, err := os.Stat(filepath.Join(dir, "g")); err == nil {
			t.Errorf("gfal-rm -r: the directory is still on the site")
		}
	})

	out := ok(t, "query", "stats", "a")
	if !strings.Contains(out, "<statistics ") || !regexp.MustCompile(`<misc>[1-9]\d*</misc>`).MatchString(out) {
		t.Errorf("xrdfs query stats a:\n%s", out)
	}
}
