package storage

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// snapshot records every file under dir with its mode, size, mtime and
// content hash, so any change outside the root shows.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		out[p] = fmt.Sprintf("%v %d %d %s", fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawRequest sends one request exactly as written (no client-side path
// normalisation) and returns the status and body.
func rawRequest(t *testing.T, host, method, target string, hdr []string, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", method, target, host, len(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatalf("%s %q: write: %v", method, target, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %q: read response: %v", method, target, err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(rb)
}

// TestHostile throws hostile paths and headers at every method and checks
// that each is refused with a 4xx, that the secret outside the root never
// leaks, that nothing outside the root changes, and that the server lives.
func TestHostile(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	secret := "TOPSECRET-" + fmt.Sprint(time.Now().UnixNano())
	for _, d := range []string{root, filepath.Join(outside, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(filepath.Join(outside, "secret.txt"), secret)
	mustWrite(filepath.Join(outside, "sub", "secret2.txt"), secret)
	mustWrite(filepath.Join(root, "ok.txt"), "fine")
	for name, target := range map[string]string{
		"escape":  "../outside",                                // relative, to a directory
		"escfile": "../outside/secret.txt",                     // relative, to a file
		"abs":     filepath.Join(outside, "secret.txt"),        // absolute
		"absdir":  outside,                                     // absolute, to a directory
		"deep":    "ok.txt/../../outside/secret.txt",           // via a file
		"loop":    "loop",                                      // a loop
		"chain":   "escape/sub",                                // through another escaping link
		"dotdot":  "..",                                        // the root's parent
		"inner":   "ok.txt",                                    // a harmless link, for contrast
		"rootabs": filepath.Join(root, "..", "outside", "sub"), // absolute through the root
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, outside)
	ts := startServer(t, Config{Root: root})

	long := strings.Repeat("n", 300)
	paths := []string{
		"/..", "/../", "/../outside/secret.txt", "//../outside/secret.txt", "/./../outside/secret.txt",
		"/ok.txt/../../outside/secret.txt", "/a/../../outside/secret.txt",
		"/%2e%2e/outside/secret.txt", "/%2E%2E/outside/secret.txt", "/.%2e/outside/secret.txt", "/%2e./outside/secret.txt",
		"/%2e%2e", "/%2e%2e%2foutside%2fsecret.txt", "/..%2foutside%2fsecret.txt", "/..%2Foutside/secret.txt",
		"/%252e%252e/outside/secret.txt", "/%252e%252e%252foutside", "/..%252foutside",
		"/%2e%2e%5coutside%5csecret.txt", "/..%5c..%5coutside", "/..\\outside\\secret.txt", "/%5c..%5coutside",
		"/%c0%ae%c0%ae/outside/secret.txt", "/%e0%80%ae%e0%80%ae/outside", "/%ff/x",
		"/a%00b", "/%00", "/ok.txt%00.jpg", "/a%0ab", "/a%0db", "/a%09b", "/a%1fb", "/a%7fb", "/a%01/b",
		"/" + long, "/d/" + long + "/f", strings.Repeat("/abcdefgh", 600),
		"/escape", "/escape/", "/escape/secret.txt", "/escape/sub/secret2.txt", "/escape/new.txt", "/escape/newdir/f",
		"/escfile", "/abs", "/absdir/secret.txt", "/absdir/", "/deep", "/loop", "/chain/secret2.txt", "/chain",
		"/dotdot/outside/secret.txt", "/dotdot", "/rootabs/secret2.txt",
		"/.lakefed-upload-x", "/sub/.lakefed-upload-x", "/.lakefed-sums",
		"http://" + "127.0.0.1" + "/../outside/secret.txt", "*", "../outside/secret.txt", "outside",
	}
	methods := []string{"GET", "HEAD", "PUT", "DELETE", "MKCOL", "PROPFIND", "PROPPATCH", "COPY", "MOVE", "LOCK", "OPTIONS"}
	bodies := map[string]string{
		"PUT":       "PWNED",
		"PROPPATCH": `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:x>1</D:x></D:prop></D:set></D:propertyupdate>`,
		"LOCK":      `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`,
	}
	type req struct {
		method, target string
		hdr            []string
	}
	var reqs []req
	for _, p := range paths {
		for _, m := range methods {
			if m == "OPTIONS" && p == "*" {
				continue // "OPTIONS *" is legitimate (RFC 9110 §9.3.7)
			}
			var hdr []string
			switch m {
			case "PROPFIND":
				hdr = []string{"Depth", "1"}
			case "COPY", "MOVE":
				hdr = []string{"Destination", "/copied-" + m}
			}
			reqs = append(reqs, req{m, p, hdr})
		}
	}
	// Raw control bytes in the request line (not percent-encoded).
	for _, p := range []string{"/a\x01b", "/a\x7fb", "/a\x00b", "/a\x1bb"} {
		reqs = append(reqs, req{"GET", p, nil}, req{"PUT", p, nil})
	}
	// Hostile Destination headers on a harmless source.
	host := ts.host
	for _, d := range []string{
		"", "::bad::", "http://evil.example/x", "https://evil.example/ok.txt", "//evil.example/x",
		"/../outside/pwn", "http://" + host + "/../outside/pwn", "http://" + host + "/%2e%2e/outside/pwn",
		"http://" + host + "/%252e%252e/outside/pwn", "http://" + host + "/..%2foutside%2fpwn",
		"http://" + host + "/escape/pwn", "http://" + host + "/escape", "http://" + host + "/absdir/pwn",
		"http://" + host + "/escfile", "http://" + host + "/.lakefed-upload-x", "http://" + host + "/",
		"/a%00b", "/" + long, "http://" + host + "/chain/pwn",
	} {
		for _, m := range []string{"COPY", "MOVE"} {
			reqs = append(reqs, req{m, "/ok.txt", []string{"Destination", d, "Overwrite", "T"}})
		}
	}
	// Bad ranges, finite-depth PROPFIND, oversized headers.
	for _, rg := range []string{"bytes=100-200", "bytes=abc", "bytes=5-1", "bytes=--1", "bytes=-", "bytes=1-2-3", "bytes=99999999999999999999-"} {
		reqs = append(reqs, req{"GET", "/ok.txt", []string{"Range", rg}})
	}
	for _, d := range []string{"infinity", "2", "-1", "1x"} {
		reqs = append(reqs, req{"PROPFIND", "/", []string{"Depth", d}})
	}
	for _, m := range methods {
		reqs = append(reqs, req{m, "/ok.txt", []string{"X-Big", strings.Repeat("h", 80<<10)}})
	}
	if len(reqs) < 200 {
		t.Fatalf("only %d hostile requests, want at least 200", len(reqs))
	}

	for _, rq := range reqs {
		body := bodies[rq.method]
		code, rb := rawRequest(t, host, rq.method, rq.target, rq.hdr, body)
		short := rq.target
		if len(short) > 60 {
			short = short[:60] + "..."
		}
		if code < 400 || code > 499 {
			t.Errorf("%s %q %v = %d (%q), want 4xx", rq.method, short, rq.hdr, code, strings.TrimSpace(rb))
		}
		if strings.Contains(rb, secret) {
			t.Errorf("%s %q leaked the secret", rq.method, short)
		}
	}

	if after := snapshot(t, outside); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("outside the root changed:\nbefore %v\nafter  %v", before, after)
	}
	for _, n := range []string{"copied-COPY", "copied-MOVE", "pwn"} {
		if _, err := os.Lstat(filepath.Join(root, n)); err == nil {
			t.Errorf("a hostile request created %s", n)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "ok.txt")); err != nil || string(b) != "fine" {
		t.Errorf("ok.txt = %q, %v; want it untouched", b, err)
	}
	code, rb := rawRequest(t, host, "GET", "/ok.txt", nil, "")
	if code != 200 || rb != "fine" {
		t.Errorf("server after the hostile run: GET /ok.txt = %d %q, want 200 fine", code, rb)
	}
	code, rb = rawRequest(t, host, "GET", "/inner", nil, "")
	if code != 200 || rb != "fine" {
		t.Errorf("GET through an inside symlink = %d %q, want 200 fine", code, rb)
	}
	t.Logf("%d hostile requests refused", len(reqs))
}
