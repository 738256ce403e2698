package storage

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// TestFullDisk runs the storage role on a small, nearly full tmpfs (root
// only; see testenv.Tmpfs) and checks that every write that does not fit
// answers 507 Insufficient Storage (RFC 4918 §11.5), never 500, leaves the
// old content and properties as they were and leaves no temp file. Before,
// a COPY over an existing file answered 500 and left a truncated prefix in
// its place, served afterwards with a checksum of the broken bytes.
//
// nr_inodes=64 also bounds the space tmpfs gives to extended attributes
// (charged per inode since Linux 6.6), so a large dead property hits
// ENOSPC too. /other is a second tmpfs below the root: a MOVE there has to
// copy.
func TestFullDisk(t *testing.T) {
	root := testenv.Tmpfs(t, "size=8m,nr_inodes=64")
	other := mkdir(t, filepath.Join(root, "other"))
	testenv.MountTmpfs(t, other, "size=1m")
	ts := startServer(t, Config{Root: root})

	big := make([]byte, 2<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(root, "a"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	ts.write(t, "b", "old b", time.Time{})
	ts.write(t, "col/x", "x", time.Time{})
	ts.write(t, "sub/keep", "keep", time.Time{})
	if err := os.WriteFile(filepath.Join(root, "col/big"), big[:1<<20], 0o644); err != nil {
		t.Fatal(err)
	}
	const setColor = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:color>blue</Z:color></D:prop></D:set></D:propertyupdate>`
	resp, body := ts.do(t, "PROPPATCH", "/b", strings.NewReader(setColor))
	wantStatus(t, resp, body, 207)
	if !strings.Contains(body, "200 OK") {
		t.Fatalf("PROPPATCH before filling: %s", body)
	}
	filler := testenv.FillFS(t, root, 64<<10)
	testenv.FillFS(t, other, 16<<10)

	// unchanged checks that the named files hold what they held, and that
	// no temp file is left anywhere.
	unchanged := func(t *testing.T, files map[string]string) {
		t.Helper()
		for name, want := range files {
			b, err := os.ReadFile(filepath.Join(root, name))
			switch {
			case want == "" && err == nil:
				t.Errorf("%s exists (%d bytes), want it absent", name, len(b))
			case want != "" && (err != nil || string(b) != want):
				t.Errorf("%s = %.20q (%d bytes), %v; want %q", name, b, len(b), err, want)
			}
		}
		noUploadTemps(t, root)
	}
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		hdr                []string
		want               int
		files              map[string]string // "" = must not exist
	}{
		{"PUT over a file", "PUT", "/b", big[:1<<20], nil, 507, map[string]string{"b": "old b"}},
		{"PUT to a new name", "PUT", "/new", big[:1<<20], nil, 507, map[string]string{"new": ""}},
		{"COPY over a file", "COPY", "/a", nil, []string{"Destination", "/b", "Overwrite", "T"}, 507, map[string]string{"b": "old b"}},
		{"COPY to a new name", "COPY", "/a", nil, []string{"Destination", "/new"}, 507, map[string]string{"new": ""}},
		{"COPY a collection", "COPY", "/col", nil, []string{"Destination", "/col2"}, 507, map[string]string{"col2/x": "", "col2/big": "", "col/x": "x"}},
		{"COPY a collection over one", "COPY", "/col", nil, []string{"Destination", "/sub"}, 507, map[string]string{"sub/keep": "keep", "sub/x": ""}},
		{"MOVE on the file system (rename)", "MOVE", "/a", nil, []string{"Destination", "/sub/a"}, 201, map[string]string{"a": "", "sub/a": string(big)}},
		{"MOVE to another file system", "MOVE", "/sub/a", nil, []string{"Destination", "/other/a"}, 507, map[string]string{"sub/a": string(big), "other/a": ""}},
		{"MOVE a collection to another file system", "MOVE", "/col", nil, []string{"Destination", "/other/col"}, 507, map[string]string{"col/x": "x", "other/col/x": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := ts.do(t, tc.method, tc.path, bytes.NewReader(tc.body), tc.hdr...)
			wantStatus(t, resp, body, tc.want)
			unchanged(t, tc.files)
		})
	}

	t.Run("GET after a failed COPY", func(t *testing.T) {
		resp, body := ts.do(t, "GET", "/b", nil, "Want-Digest", "adler32")
		wantStatus(t, resp, body, 200)
		if body != "old b" || resp.Header.Get("Digest") != "adler32="+adlerHex("old b") {
			t.Errorf("GET /b = %q, Digest %q; want the old content and its checksum", body, resp.Header.Get("Digest"))
		}
	})

	t.Run("PROPPATCH a huge property", func(t *testing.T) {
		huge := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop><Z:huge>` +
			strings.Repeat("h", 60<<10) + `</Z:huge></D:prop></D:set></D:propertyupdate>`
		resp, body := ts.do(t, "PROPPATCH", "/b", strings.NewReader(huge))
		if resp.StatusCode != 207 || !strings.Contains(body, "507 Insufficient Storage") || strings.Contains(body, " 500 ") {
			t.Errorf("PROPPATCH huge = %d %s; want 207 with a 507 propstat", resp.StatusCode, body)
		}
		find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/><Z:huge xmlns:Z="urn:x"/></D:prop></D:propfind>`
		resp, body = ts.do(t, "PROPFIND", "/b", strings.NewReader(find), "Depth", "0")
		wantStatus(t, resp, body, 207)
		if !strings.Contains(body, ">blue<") || strings.Contains(body, "hhhh") {
			t.Errorf("after the failed PROPPATCH: %s; want color blue kept and no huge", body)
		}
	})

	t.Run("MOVE to another file system with room", func(t *testing.T) {
		resp, body := ts.do(t, "MOVE", "/b", nil, "Destination", "/other/b")
		wantStatus(t, resp, body, 201)
		unchanged(t, map[string]string{"b": "", "other/b": "old b"})
		find := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:color xmlns:Z="urn:x"/></D:prop></D:propfind>`
		resp, body = ts.do(t, "PROPFIND", "/other/b", strings.NewReader(find), "Depth", "0")
		wantStatus(t, resp, body, 207)
		if !strings.Contains(body, ">blue<") {
			t.Errorf("dead property not carried across file systems: %s", body)
		}
	})

	t.Run("with the space back", func(t *testing.T) {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		resp, body := ts.do(t, "COPY", "/col", nil, "Destination", "/col2")
		wantStatus(t, resp, body, 201)
		resp, body = ts.do(t, "PUT", "/new", bytes.NewReader(big[:1<<20]))
		wantStatus(t, resp, body, 201)
		unchanged(t, map[string]string{"col2/x": "x", "col2/big": string(big[:1<<20]), "new": string(big[:1<<20])})
	})
}
