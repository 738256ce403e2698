package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// overlapTree is a tree where a collection, /amp, can be reached under
// other names: /x/lnk is a symlink to it (so /x/lnk/in is inside it) and
// /alias is one too.
func overlapTree(t *testing.T, ts *testServer) {
	t.Helper()
	ts.write(t, "amp/a.dat", strings.Repeat("amplification ", 4096), time.Time{})
	ts.write(t, "amp/sub/f", "f", time.Time{})
	if err := os.Mkdir(filepath.Join(ts.root, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"x/lnk": "../amp", "alias": "amp"} {
		if err := os.Symlink(target, filepath.Join(ts.root, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCopyMoveOverlap checks that a COPY or MOVE whose destination is the
// source, lies inside it or contains it is refused with 403 (RFC 4918
// §9.8.5, §9.9.4) and changes nothing, however the two paths are spelled:
// trailing slashes, percent-encoding, or a symlink inside the root. A
// COPY of /amp into /amp/sub/in used to recurse until it hit x/net/webdav's
// depth limit, leaving hundreds of nested copies.
func TestCopyMoveOverlap(t *testing.T) {
	for _, tc := range []struct {
		name, method, src, dst string
	}{
		{"copy into own member", "COPY", "/amp", "/amp/sub/in"},
		{"copy into own member, trailing slashes", "COPY", "/amp/", "/amp/sub/in/"},
		{"copy into own member, percent-encoded", "COPY", "/%61mp", "/%61mp/s%75b/in"},
		{"copy into own member through a symlink", "COPY", "/amp", "/x/lnk/in"},
		{"copy onto itself", "COPY", "/amp", "/amp"},
		{"copy onto itself, trailing slash", "COPY", "/amp/", "/amp"},
		{"copy file onto itself", "COPY", "/amp/a.dat", "/amp/a.dat"},
		{"copy file onto itself through a symlinked parent", "COPY", "/amp/a.dat", "/x/lnk/a.dat"},
		{"copy onto a symlink to itself", "COPY", "/amp", "/alias"},
		{"copy onto its parent", "COPY", "/amp/sub", "/amp"},
		{"copy onto its grandparent through a symlink", "COPY", "/amp/sub/f", "/x/lnk"},
		{"move into own member", "MOVE", "/amp", "/amp/sub/in"},
		{"move into own member through a symlink", "MOVE", "/amp", "/x/lnk/in"},
		{"move onto itself, trailing slash", "MOVE", "/amp/", "/amp"},
		{"move file onto itself through a symlinked parent", "MOVE", "/amp/a.dat", "/x/lnk/a.dat"},
		{"move onto its parent", "MOVE", "/amp/sub", "/amp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{})
			overlapTree(t, ts)
			before := snapshot(t, ts.root)
			start := time.Now()
			code, body := rawRequest(t, ts.host, tc.method, tc.src,
				[]string{"Destination", "http://" + ts.host + tc.dst, "Overwrite", "T"}, "")
			if code != 403 {
				t.Errorf("%s %s -> %s = %d (%q), want 403", tc.method, tc.src, tc.dst, code, strings.TrimSpace(body))
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("%s took %v", tc.method, d)
			}
			if after := snapshot(t, ts.root); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("tree changed:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestCopySymlinkMembers checks a collection COPY over members that are
// symlinks: one inside the root is followed (its content is copied); one
// that leads outside the root or nowhere is no resource (PROPFIND does not
// list it) and is left out; a loop back to an ancestor is answered 508
// Loop Detected (RFC 5842 §7.2) with nothing created.
func TestCopySymlinkMembers(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	ts := startServer(t, Config{Root: mkdir(t, root)})
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts.write(t, "c/f", "file f", time.Time{})
	ts.write(t, "target/g", "file g", time.Time{})
	for name, target := range map[string]string{
		"c/inner":   "../target", // a collection inside the root
		"c/innerf":  "f",         // a file inside the root
		"c/escape":  "../../secret",
		"c/dangle":  "nothing-here",
		"loopy/f":   "",
		"loopy/up":  "..", // the root, which holds loopy: a cycle
		"loopy2/me": ".",  // loopy2 itself
	} {
		p := filepath.Join(root, name)
		if target == "" {
			ts.write(t, name, "in loopy", time.Time{})
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}

	resp, body := ts.do(t, "COPY", "/c", nil, "Destination", "/d")
	wantStatus(t, resp, body, 201)
	for name, want := range map[string]string{"d/f": "file f", "d/inner/g": "file g", "d/innerf": "file f"} {
		if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"d/escape", "d/dangle"} {
		if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
			t.Errorf("%s was copied; a link that leads nowhere in the root is no resource", name)
		}
	}

	for _, src := range []string{"/loopy", "/loopy2"} {
		before := contents(t, root)
		resp, body = ts.do(t, "COPY", src, nil, "Destination", "/loopcopy")
		wantStatus(t, resp, body, 508)
		if after := contents(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("COPY %s changed the tree:\nbefore %v\nafter  %v", src, before, after)
		}
	}
	noUploadTemps(t, root)
}

// contents maps every name under dir (symlinks not followed) to its kind
// and, for files, content: what a failed request must leave as it was.
// Unlike snapshot it ignores times, which a cleaned-up temp file changes.
func contents(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = "file " + string(b)
		case d.Type()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[p] = "link " + l
		default:
			out[p] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// noUploadTemps fails if a temp entry (file or directory, the upload
// prefix PUT, COPY and MOVE write under) is left anywhere under root.
// Other reserved names, such as the checksum sidecars, may stay.
func noUploadTemps(t testing.TB, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), uploadPrefix) {
			t.Errorf("temp entry left behind: %s", p)
		}
		return nil
	})
}

func mkdir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCopyMoveStatus is the status matrix of RFC 4918 §9.8.5 and §9.9.4
// for COPY and MOVE, with what each leaves on disk.
func TestCopyMoveStatus(t *testing.T) {
	type want struct {
		code  int
		files map[string]string // path → content; "" = must not exist, "/" = a directory
	}
	for _, method := range []string{"COPY", "MOVE"} {
		srcGone := "file f" // what /f holds after a successful request
		if method == "MOVE" {
			srcGone = ""
		}
		for _, tc := range []struct {
			name     string
			src, dst string
			hdr      []string
			want     want
		}{
			{"missing source", "/nope", "/new", nil, want{404, map[string]string{"new": ""}}},
			{"missing destination parent", "/f", "/nodir/new", nil, want{409, map[string]string{"f": "file f", "nodir": ""}}},
			{"destination parent is a file", "/f", "/g/new", nil, want{409, map[string]string{"f": "file f", "g": "file g"}}},
			{"exists, Overwrite F", "/f", "/g", []string{"Overwrite", "F"}, want{412, map[string]string{"f": "file f", "g": "file g"}}},
			{"exists, Overwrite T", "/f", "/g", []string{"Overwrite", "T"}, want{204, map[string]string{"f": srcGone, "g": "file f"}}},
			// RFC 4918 §10.6: no Overwrite header means T.
			{"exists, no Overwrite", "/f", "/g", nil, want{204, map[string]string{"f": srcGone, "g": "file f"}}},
			{"bad Overwrite", "/f", "/g", []string{"Overwrite", "X"}, want{400, map[string]string{"f": "file f", "g": "file g"}}},
			{"new", "/f", "/new", nil, want{201, map[string]string{"f": srcGone, "new": "file f"}}},
			{"new in a subcollection", "/f", "/d/new", nil, want{201, map[string]string{"f": srcGone, "d/new": "file f", "d/old": "old"}}},
			{"same", "/f", "/f", nil, want{403, map[string]string{"f": "file f"}}},
			{"file onto a collection", "/f", "/d", nil, want{204, map[string]string{"f": srcGone, "d": "file f"}}},
			{"collection onto a collection", "/c", "/d", nil, want{204, map[string]string{"d/m": "member", "d/old": "", "d/sub/n": "deep"}}},
			{"collection onto a file", "/c", "/g", nil, want{204, map[string]string{"g/m": "member", "g/sub/n": "deep"}}},
			{"collection, new", "/c", "/c2", nil, want{201, map[string]string{"c2/m": "member", "c2/sub/n": "deep"}}},
		} {
			t.Run(method+" "+tc.name, func(t *testing.T) {
				ts := startServer(t, Config{})
				ts.write(t, "f", "file f", time.Time{})
				ts.write(t, "g", "file g", time.Time{})
				ts.write(t, "d/old", "old", time.Time{})
				ts.write(t, "c/m", "member", time.Time{})
				ts.write(t, "c/sub/n", "deep", time.Time{})
				hdr := append([]string{"Destination", ts.url + tc.dst}, tc.hdr...)
				resp, body := ts.do(t, method, tc.src, nil, hdr...)
				wantStatus(t, resp, body, tc.want.code)
				for name, content := range tc.want.files {
					b, err := os.ReadFile(filepath.Join(ts.root, name))
					switch {
					case content == "" && err == nil:
						t.Errorf("%s exists (%q), want it absent", name, b)
					case content != "" && (err != nil || string(b) != content):
						t.Errorf("%s = %q, %v; want %q", name, b, err, content)
					}
				}
				noUploadTemps(t, ts.root)
			})
		}
	}
	t.Run("depth", func(t *testing.T) {
		ts := startServer(t, Config{})
		ts.write(t, "c/m", "member", time.Time{})
		for _, tc := range []struct {
			method, depth, dst string
			code               int
		}{
			{"COPY", "1", "/x1", 400},
			{"MOVE", "0", "/x2", 400},
			{"COPY", "0", "/shallow", 201},
			{"COPY", "infinity", "/deep", 201},
		} {
			resp, body := ts.do(t, tc.method, "/c", nil, "Destination", tc.dst, "Depth", tc.depth)
			wantStatus(t, resp, body, tc.code)
		}
		if ents, err := os.ReadDir(filepath.Join(ts.root, "shallow")); err != nil || len(ents) != 0 {
			t.Errorf("Depth 0 COPY of a collection: members %v, %v; want an empty collection", ents, err)
		}
		if b, _ := os.ReadFile(filepath.Join(ts.root, "deep/m")); string(b) != "member" {
			t.Errorf("Depth infinity COPY: deep/m = %q", b)
		}
	})
}

// TestCopyCarriesProperties checks that COPY gives the copy the source's
// dead properties (file and collection) and its kept checksum, stamped
// with the copy's own fingerprint so it is used, not recomputed.
func TestCopyCarriesProperties(t *testing.T) {
	ts := startServer(t, Config{})
	old := time.Now().Add(-time.Hour)
	ts.write(t, "c/w", "Wikipedia", old)
	patch := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:color>%s</Z:color></D:prop></D:set></D:propertyupdate>`
	for p, v := range map[string]string{"/c/w": "blue", "/c": "green"} {
		resp, body := ts.do(t, "PROPPATCH", p, strings.NewReader(fmt.Sprintf(patch, v)))
		wantStatus(t, resp, body, 207)
	}
	resp, body := ts.do(t, "HEAD", "/c/w", nil, "Want-Digest", "adler32")
	wantStatus(t, resp, body, 200)

	resp, body = ts.do(t, "COPY", "/c", nil, "Destination", "/d")
	wantStatus(t, resp, body, 201)
	find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/></D:prop></D:propfind>`
	for p, v := range map[string]string{"/d/w": "blue", "/d": "green"} {
		resp, body := ts.do(t, "PROPFIND", p, strings.NewReader(find), "Depth", "0")
		wantStatus(t, resp, body, 207)
		if !strings.Contains(body, ">"+v+"<") {
			t.Errorf("PROPFIND %s: dead property not carried by COPY: %s", p, body)
		}
	}
	f, err := os.Open(filepath.Join(ts.root, "d/w"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if sum, ok := ts.s.cachedSum("adler32", &st); !ok || sum != "11e60398" {
		t.Errorf("copy's kept adler32 = %q, %v; want 11e60398 valid for the copy", sum, ok)
	}
	// A MOVE (a rename, which moves the ctime the kept sums' fingerprint
	// holds) keeps them too. The source's ctime is settled (the HEAD above
	// waited for it), so its sums may be carried (checksum.go's settle).
	resp, body = ts.do(t, "MOVE", "/c/w", nil, "Destination", "/e")
	wantStatus(t, resp, body, 201)
	n := counterValue(ts.s.m.computed)
	for _, p := range []string{"/d/w", "/e"} {
		resp, _ = ts.do(t, "HEAD", p, nil, "Want-Digest", "adler32")
		if got := resp.Header.Get("Digest"); got != "adler32=11e60398" {
			t.Errorf("HEAD %s Digest = %q", p, got)
		}
	}
	if counterValue(ts.s.m.computed) != n {
		t.Errorf("the checksum was computed again %v times after COPY and MOVE, want 0", counterValue(ts.s.m.computed)-n)
	}
}

// TestCopyMoveLocks checks COPY and MOVE against WebDAV locks (RFC 4918
// §7.5, §9.8, §9.9): a locked destination needs its token, a COPY does
// not need the source's, a MOVE does.
func TestCopyMoveLocks(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "f", "file f", time.Time{})
	ts.write(t, "locked", "locked", time.Time{})
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>t</D:owner></D:lockinfo>`
	resp, body := ts.do(t, "LOCK", "/locked", strings.NewReader(lockBody))
	wantStatus(t, resp, body, 200)
	token := resp.Header.Get("Lock-Token")
	for _, tc := range []struct {
		name, method, src, dst string
		hdr                    []string
		code                   int
	}{
		{"copy onto locked, no token", "COPY", "/f", "/locked", nil, 423},
		{"move onto locked, no token", "MOVE", "/f", "/locked", nil, 423},
		{"move locked, no token", "MOVE", "/locked", "/m", nil, 423},
		{"copy onto locked, wrong token", "COPY", "/f", "/locked", []string{"If", "(<opaquelocktoken:nope>)"}, 412},
		{"copy locked source", "COPY", "/locked", "/c", nil, 201},
		// RFC 4918 §10.4.3: an untagged list applies to the request URL
		// (the source here), so the destination's token goes in a tagged one.
		{"copy onto locked, token", "COPY", "/f", "/locked", []string{"If", "<" + ts.url + "/locked> (" + token + ")"}, 204},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.do(t, tc.method, tc.src, nil, append([]string{"Destination", tc.dst}, tc.hdr...)...)
			wantStatus(t, resp, body, tc.code)
		})
	}
	if b, _ := os.ReadFile(filepath.Join(ts.root, "f")); string(b) != "file f" {
		t.Errorf("f = %q after refused MOVEs", b)
	}
}

// TestCopyPermissions checks that a copy keeps the permission bits but
// not setuid/setgid: the server often runs as root, and a setuid file
// copied by root would become setuid root.
func TestCopyPermissions(t *testing.T) {
	ts := startServer(t, Config{})
	ts.write(t, "s", "suid", time.Time{})
	if err := os.Chmod(filepath.Join(ts.root, "s"), 0o750|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	resp, body := ts.do(t, "COPY", "/s", nil, "Destination", "/s2")
	wantStatus(t, resp, body, 201)
	fi, err := os.Stat(filepath.Join(ts.root, "s2"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 || fi.Mode().Perm() != 0o750 {
		t.Errorf("copy mode = %v, want -rwxr-x--- without setuid", fi.Mode())
	}
}
