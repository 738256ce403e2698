package xrootd

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"hash/adler32"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// run runs a client tool within a minute and returns its output. The
// XRD_ settings make XrdCl give up quickly; env may choose pgread
// (XRD_CPUSEPGWRTRD, on by default in xrdcp 5) or not.
func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "XRD_CONNECTIONRETRY=1", "XRD_REQUESTTIMEOUT=20", "XRD_STREAMTIMEOUT=20")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func adler(b []byte) string { return fmt.Sprintf("%08x", adler32.Checksum(b)) }

func TestXrdcp(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	ns := newFakeNS()
	data := payload(20<<20+12345, 10)
	ns.set("/store/data/f.root", data)
	s, addr := startDoor(t, ns, Options{})
	dir := t.TempDir()

	for _, pg := range []string{"1", "0"} {
		t.Run("download pgread="+pg, func(t *testing.T) {
			dst := filepath.Join(dir, "down"+pg)
			out, err := run(t, []string{"XRD_CPUSEPGWRTRD=" + pg, "XRD_LOGLEVEL=Debug"}, xrdcp, "-f", "--cksum", "adler32",
				"root://"+addr+"//store/data/f.root?lakefed.test=1", dst)
			if err != nil {
				t.Fatalf("xrdcp download: %v\n%s", err, lastLines(out, 30))
			}
			checkXrdcpLog(t, out, map[string]string{"1": "message: kXR_pgread", "0": "message: kXR_read"}[pg])
			got, _ := os.ReadFile(dst)
			if !bytes.Equal(got, data) {
				t.Fatalf("downloaded %d bytes, want %d (or bytes differ)", len(got), len(data))
			}
		})
		t.Run("upload pgwrite="+pg, func(t *testing.T) {
			src := filepath.Join(dir, "up"+pg)
			up := payload(9<<20+77, 11)
			if err := os.WriteFile(src, up, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := "/store/up/" + pg + "/g.root"
			out, err := run(t, []string{"XRD_CPUSEPGWRTRD=" + pg, "XRD_LOGLEVEL=Debug"}, xrdcp, "--cksum", "adler32", src, "root://"+addr+"/"+dst)
			if err != nil {
				t.Fatalf("xrdcp upload: %v\n%s", err, lastLines(out, 30))
			}
			checkXrdcpLog(t, out, map[string]string{"1": "message: kXR_pgwrite", "0": "message: kXR_write"}[pg])
			got, ok := ns.get(dst)
			if !ok || !bytes.Equal(got, up) {
				t.Fatalf("uploaded %d bytes (stored %v), want %d", len(got), ok, len(up))
			}
			// Without -f an existing file is not replaced.
			if out, err := run(t, nil, xrdcp, "-s", src, "root://"+addr+"/"+dst); err == nil {
				t.Errorf("xrdcp over an existing file without -f succeeded:\n%s", out)
			}
		})
	}
	if st := s.Stats(); st.Opens < 4 || st.ReadBytes < 2*int64(len(data)) || st.WrittenBytes < 2*(9<<20) {
		t.Errorf("Stats = %+v: opens, read and written bytes too low", st)
	}
}

// checkXrdcpLog checks in xrdcp's debug log that it sent the requests
// named by req (so pgread and pgwrite are what was tested, or not), and
// that it compared adler32 checksums and found them equal.
func checkXrdcpLog(t *testing.T, log, req string) {
	t.Helper()
	if !strings.Contains(log, req) {
		t.Errorf("xrdcp's log has no %q", req)
	}
	if !strings.Contains(log, "Checksum verification: succeeded") {
		t.Errorf("xrdcp's log does not say the adler32 checksums were verified:\n%s", grepLines(log, "(?i)checksum"))
	}
}

func TestXrdfs(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	ns := newFakeNS()
	a := payload(1000, 20)
	ns.set("/atlas/a.root", a)
	ns.set("/atlas/sub/b.root", payload(5, 21))
	ns.replicas["/atlas/a.root"] = []*url.URL{
		{Scheme: "root", Host: "site-a.example:1095", Path: "//atlas/a.root"},
		{Scheme: "https", Host: "site-b.example", Path: "/atlas/a.root"},
	}
	_, addr := startDoor(t, ns, Options{})
	root := "root://" + addr

	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"ls", "/atlas"}, []string{"/atlas/a.root", "/atlas/sub"}},
		{[]string{"ls", "-l", "/atlas"}, []string{"1000", "/atlas/a.root", "d", "/atlas/sub"}},
		{[]string{"stat", "/atlas/a.root"}, []string{"Size:   1000", "IsReadable"}},
		{[]string{"stat", "/atlas/sub"}, []string{"IsDir"}},
		{[]string{"locate", "/atlas/a.root"}, []string{"site-a.example:1095", addr}},
		{[]string{"query", "checksum", "/atlas/a.root"}, []string{"adler32 " + adler(a)}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, err := run(t, nil, xrdfs, append([]string{root}, c.args...)...)
			if err != nil {
				t.Fatalf("xrdfs %v: %v\n%s", c.args, err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("xrdfs %v = %q, want it to contain %q", c.args, out, w)
				}
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		out, err := run(t, nil, xrdfs, root, "stat", "/atlas/none.root")
		if err == nil || !strings.Contains(out, "[3011]") {
			t.Errorf("xrdfs stat of a missing file: %v %q, want kXR_NotFound [3011]", err, out)
		}
	})
}

// TestOutageBound: with xrdfs and xrdcp, an outage ends in kXR_ServerError
// (never kXR_NotFound) within OutageWait and a little more (the clients'
// own turns), with the default bound (5 s) and a configured one.
func TestOutageBound(t *testing.T) {
	xrdfs := testenv.Require(t, "xrdfs")
	xrdcp := testenv.Require(t, "xrdcp")
	const slack = 3 * time.Second
	for _, c := range []struct {
		name  string
		bound time.Duration // 0: the default
	}{{"default", 0}, {"2s", 2 * time.Second}} {
		ns := newFakeNS()
		ns.set("/f", []byte("x"))
		ns.down.Store(true)
		s, addr := startDoor(t, ns, Options{OutageWait: c.bound})
		bound := cmp.Or(c.bound, DefaultOutageWait)
		for _, cl := range []struct {
			tool string
			args []string
		}{
			{xrdfs, []string{"root://" + addr, "stat", "/f"}},
			{xrdcp, []string{"-f", "root://" + addr + "//f", filepath.Join(t.TempDir(), "f")}},
		} {
			t.Run(c.name+"/"+filepath.Base(cl.tool), func(t *testing.T) {
				start := time.Now()
				out, err := run(t, nil, cl.tool, cl.args...)
				took := time.Since(start)
				if err == nil || strings.Contains(out, "[3011]") || strings.Contains(strings.ToLower(out), "no such file") {
					t.Errorf("%s during an outage: %v %q, want an error that is not 'not found'", cl.tool, err, out)
				}
				if !strings.Contains(out, "[3012]") {
					t.Errorf("%s during an outage = %q, want kXR_ServerError [3012] after the waits", cl.tool, out)
				}
				if took > bound+slack {
					t.Errorf("%s during an outage took %v, want at most %v (OutageWait %v)", cl.tool, took.Round(time.Millisecond), bound+slack, bound)
				}
			})
		}
		if st := s.Stats(); st.Errors[classUnavailable] < 2 || st.Errors[classNotFound] != 0 {
			t.Errorf("%s: door errors %+v, want waits then server errors, no notfound", c.name, st.Errors)
		}
	}
}

func TestRedirect(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	data := payload(3<<20+5, 30)
	// The data server: a second door holding the file under two names.
	dns := newFakeNS()
	dns.set("/store/f.root", data)
	dns.set("/disk1/store/f.root", data)
	ds, daddr := startDoor(t, dns, Options{})
	// The redirector knows the file too, so it can serve it itself.
	rns := newFakeNS()
	rns.set("/store/f.root", data)
	rns.set("/store/g.root", data)
	rns.replicas["/store/f.root"] = []*url.URL{
		{Scheme: "https", Host: "web.example", Path: "/store/f.root"},
		{Scheme: "root", Host: daddr, Path: "//store/f.root"},
	}
	rns.replicas["/store/g.root"] = []*url.URL{{Scheme: "root", Host: daddr, Path: "//disk1/store/f.root"}}
	rs, raddr := startDoor(t, rns, Options{})
	dir := t.TempDir()

	for i, c := range []struct {
		name, path        string
		redirects, dOpens int64
	}{
		{"same path", "/store/f.root", 1, 1},
		{"other path (URL redirect)", "/store/g.root", 2, 2},
		{"tried", "/store/f.root?tried=127.0.0.1&triedrc=ioerr", 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := filepath.Join(dir, fmt.Sprint(i))
			out, err := run(t, nil, xrdcp, "-f", "-s", "root://"+raddr+"/"+c.path, dst)
			if err != nil {
				t.Fatalf("xrdcp: %v\n%s", err, out)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
				t.Fatalf("got %d bytes, want %d (or bytes differ)", len(got), len(data))
			}
			if got := rs.Stats().Redirects; got != c.redirects {
				t.Errorf("redirector redirects = %d, want %d", got, c.redirects)
			}
			if got := ds.Stats().Opens; got != c.dOpens {
				t.Errorf("data server opens = %d, want %d", got, c.dOpens)
			}
		})
	}
}

// python runs a Python script, or skips (fails under
// LAKEFED_REQUIRE_INTEROP=1) when python3 or a module it needs is missing.
func python(t *testing.T, modules, script string, args ...string) string {
	t.Helper()
	py := testenv.Require(t, "python3")
	if out, err := exec.Command(py, "-c", "import "+modules).CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("python3 cannot import %s: %s", modules, out))
	}
	out, err := run(t, nil, py, append([]string{"-c", script}, args...)...)
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return out
}

func TestPythonVectorRead(t *testing.T) {
	ns := newFakeNS()
	data := payload(1<<20, 40)
	ns.set("/v/f", data)
	_, addr := startDoor(t, ns, Options{})
	chunks := [][2]int{{0, 16}, {4096, 1000}, {999_000, 49_576}, {12345, 1}}
	var spec, want []string
	for _, c := range chunks {
		spec = append(spec, fmt.Sprintf("(%d,%d)", c[0], c[1]))
		want = append(want, fmt.Sprintf("%d %d %08x", c[0], c[1], adler32.Checksum(data[c[0]:c[0]+c[1]])))
	}
	script := `
import sys, zlib
from XRootD import client
f = client.File()
st, _ = f.open(sys.argv[1])
assert st.ok, st
fs = client.FileSystem(sys.argv[1].split("//v/")[0])
st, cfg = fs.query(client.flags.QueryCode.CONFIG, "readv_iov_max readv_ior_max")
assert st.ok, st
print(cfg.decode().replace("\n", " ").strip())
st, res = f.vector_read(chunks=[` + strings.Join(spec, ",") + `])
assert st.ok, st
for c in res.chunks:
    print(c.offset, c.length, "%08x" % zlib.adler32(c.buffer))
f.close()
`
	out := python(t, "XRootD.client", script, "root://"+addr+"//v/f")
	want = append([]string{"1024 2097136"}, want...)
	if got := strings.TrimSpace(out); got != strings.Join(want, "\n") {
		t.Errorf("config query and vector_read:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

func TestUproot(t *testing.T) {
	ns := newFakeNS()
	_, addr := startDoor(t, ns, Options{})
	file := filepath.Join(t.TempDir(), "events.root")
	python(t, "uproot, numpy", `
import sys, uproot, numpy as np
with uproot.recreate(sys.argv[1]) as f:
    f["Events"] = {"pt": np.arange(10000, dtype=np.float64) * 0.5, "n": np.arange(10000, dtype=np.int32) % 7}
`, file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ns.set("/cms/events.root", b)
	// uproot's own XRootD source (vector reads through the bindings) and
	// fsspec-xrootd's.
	for _, handler := range []string{"uproot.source.xrootd.XRootDSource", "uproot.source.fsspec.FSSpecSource"} {
		t.Run(handler, func(t *testing.T) {
			out := python(t, "uproot, fsspec_xrootd", `
import sys, uproot, uproot.source.xrootd, uproot.source.fsspec
with uproot.open(sys.argv[1], handler=`+handler+`) as f:
    t = f["Events"]
    pt = t["pt"].array(library="np")
    n = t["n"].array(library="np")
    print(len(pt), pt.sum(), n.sum())
`, "root://"+addr+"//cms/events.root")
			// sum(0.5*i) for i < 10000 = 24997500; sum(i%7) = 1428 full
			// cycles of 21 + (0..3) = 29994.
			if got := strings.TrimSpace(out); got != "10000 24997500.0 29994" {
				t.Errorf("uproot over root:// = %q, want \"10000 24997500.0 29994\"", got)
			}
		})
	}
}

// stallNS serves its files' first stallAt bytes, then stalls until the
// request's context ends (the connection is gone), saying so on stalled.
type stallNS struct {
	*fakeNS
	stallAt int64
	stalled chan struct{}
	once    sync.Once
}

func (n *stallNS) Open(ctx context.Context, p string, off, l int64) (io.ReadCloser, error) {
	rc, err := n.fakeNS.Open(ctx, p, off, l)
	if err != nil {
		return nil, err
	}
	return &stallReader{n: n, ctx: ctx, r: rc, pos: off}, nil
}

type stallReader struct {
	n   *stallNS
	ctx context.Context
	r   io.ReadCloser
	pos int64
}

func (r *stallReader) Read(p []byte) (int, error) {
	if r.pos >= r.n.stallAt {
		r.n.once.Do(func() { close(r.n.stalled) })
		<-r.ctx.Done()
		return 0, r.ctx.Err()
	}
	p = p[:min(int64(len(p)), r.n.stallAt-r.pos)]
	n, err := r.r.Read(p)
	r.pos += int64(n)
	return n, err
}

func (r *stallReader) Close() error { return r.r.Close() }

// TestFailover: the data server a client was redirected to dies in the
// middle of the copy; xrdcp goes back to the door with tried=, is not
// sent there again, and finishes from the door, byte-identical.
func TestFailover(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	data := payload(24<<20+3, 50)
	dns := &stallNS{fakeNS: newFakeNS(), stallAt: 5 << 20, stalled: make(chan struct{})}
	dns.set("/store/f.root", data)
	ds, daddr := startDoor(t, dns, Options{})
	rns := newFakeNS()
	rns.set("/store/f.root", data)
	rns.replicas["/store/f.root"] = []*url.URL{{Scheme: "root", Host: daddr, Path: "//store/f.root"}}
	rs, raddr := startDoor(t, rns, Options{})

	go func() {
		select {
		case <-dns.stalled:
			ds.Close() // the data server dies mid-transfer
		case <-time.After(time.Minute):
		}
	}()
	dst := filepath.Join(t.TempDir(), "f")
	out, err := run(t, []string{"XRD_LOGLEVEL=Debug"}, xrdcp, "-f", "--cksum", "adler32", "root://"+raddr+"//store/f.root", dst)
	if err != nil {
		t.Fatalf("xrdcp: %v\n%s", err, lastLines(out, 30))
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes, want %d (or bytes differ)", len(got), len(data))
	}
	if !strings.Contains(out, "tried=127.0.0.1") {
		t.Errorf("xrdcp did not come back with tried=:\n%s", lastLines(out, 30))
	}
	// XrdCl first reopens at the door without tried= (and is sent to
	// the dead server again), then fails there and comes back with it.
	if st := rs.Stats(); st.Redirects < 1 || st.Opens-st.Redirects != 1 {
		t.Errorf("door: %d redirects, %d opens; want the rest of the file served here (1 open)\n%s",
			st.Redirects, st.Opens, grepLines(out, "kXR_open.*(Trying|tried)|Redirected from"))
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

func grepLines(s, re string) string {
	var out []string
	r := regexp.MustCompile(re)
	for _, l := range strings.Split(s, "\n") {
		if r.MatchString(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
