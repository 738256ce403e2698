package interop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// proc is a lakefed child process on a fixed loopback port (testenv.Proc,
// in the spelling the interop tests use).
type proc struct {
	bin  string
	args []string
	port int
	log  string
	p    testenv.Proc
	// addr is where it listens: 127.0.0.1:port when empty.
	addr string
	// ns, when set, is the network namespace it runs in.
	ns *testenv.NetNS
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	host := ""
	if p.addr != "" {
		host, _, _ = net.SplitHostPort(p.addr)
	}
	p.p = testenv.Proc{Bin: p.bin, Args: p.args, Port: p.port, Log: p.log, Host: host, NS: p.ns}
	p.p.Start(t)
}

func (p *proc) kill() { p.p.Kill() }

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.p.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// undoneLake is two lakefed storage sites holding one file, and a
// federator in front of them, each its own process.
type undoneLake struct {
	a, b, fed *proc
	dirA      string
	dirB      string
	url       string
}

func startUndoneLake(t *testing.T, mode string) *undoneLake {
	bin := lakefedBinary(t)
	dir := t.TempDir()
	l := &undoneLake{dirA: filepath.Join(dir, "a"), dirB: filepath.Join(dir, "b")}
	site := func(root string) *proc {
		os.MkdirAll(root, 0o755)
		port := testenv.FreePort(t)
		return &proc{bin: bin, port: port, log: root + ".log",
			args: []string{"storage", "--root", root, "--listen", "127.0.0.1:" + strconv.Itoa(port)}}
	}
	l.a, l.b = site(l.dirA), site(l.dirB)
	fport := testenv.FreePort(t)
	// site-b is the replica readers are sent to first, so a version it
	// still held would be served.
	cfg := fmt.Sprintf(`listen: 127.0.0.1:%d
federation:
  mode: %s
  metadata_cache: {ttl: 200ms, negative_ttl: 100ms}
  health: {interval: 100ms, timeout: 1s, fail_after: 2, recover_after: 1}
  endpoints:
    - {name: site-a, url: "http://127.0.0.1:%d/", writable: true, priority: 2, timeout: 3s}
    - {name: site-b, url: "http://127.0.0.1:%d/", writable: true, priority: 1, timeout: 3s}
`, fport, mode, l.a.port, l.b.port)
	cfgFile := filepath.Join(dir, "fed.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	l.fed = &proc{bin: bin, port: fport, log: filepath.Join(dir, "fed.log"), args: []string{"serve", cfgFile}}
	l.url = "http://127.0.0.1:" + strconv.Itoa(fport)
	for _, p := range []*proc{l.a, l.b, l.fed} {
		p.start(t)
		t.Cleanup(p.kill)
	}
	return l
}

func put(t *testing.T, u string, data []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After") + " " + string(msg)
}

func getBody(u string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestPutWhileReplicaDownNeverUndone: two replicas hold v1 of a file and
// one of them is unreachable (killed, or stopped). A PUT of v2 through
// the federator is either refused (and then v1 stays, everywhere), or
// acknowledged and then never undone: not when the replica returns with
// v1, in redirect and in proxy mode, and not after a restart of the
// federator between the PUT and the replica's return.
func TestPutWhileReplicaDownNeverUndone(t *testing.T) {
	for _, mode := range []string{"redirect", "proxy"} {
		for _, fault := range []string{"kill", "stop"} {
			for _, restart := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/restart=%v", mode, fault, restart)
				t.Run(name, func(t *testing.T) { putWhileDown(t, mode, fault, restart) })
			}
		}
	}
}

func putWhileDown(t *testing.T, mode, fault string, restart bool) {
	l := startUndoneLake(t, mode)
	v1, v2 := bytes.Repeat([]byte("version one\n"), 5000), bytes.Repeat([]byte("version two!\n"), 4000)
	for _, d := range []string{l.dirA, l.dirB} {
		if err := os.WriteFile(filepath.Join(d, "f"), v1, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, body, err := getBody(l.url + "/f"); err != nil || code != 200 || !bytes.Equal(body, v1) {
		t.Fatalf("GET before = %d %d bytes %v", code, len(body), err)
	}
	switch fault {
	case "kill":
		l.b.kill()
	case "stop":
		l.b.signal(t, syscall.SIGSTOP)
	}
	code, msg := put(t, l.url+"/f", v2)
	acked := code/100 == 2
	if !acked && (code != 503 || msg[0] == ' ') {
		t.Fatalf("PUT with a replica down = %d %q, want 2xx, or 503 with Retry-After", code, msg)
	}
	if restart {
		l.fed.kill()
		l.fed.start(t)
	}
	switch fault {
	case "kill":
		l.b.start(t)
	case "stop":
		l.b.signal(t, syscall.SIGCONT)
	}
	want := v1
	if acked {
		want = v2
	} else {
		// Refused: nothing changed anywhere, and once the replica
		// answers again the same PUT goes through.
		for _, d := range []string{l.dirA, l.dirB} {
			if got, _ := os.ReadFile(filepath.Join(d, "f")); !bytes.Equal(got, v1) {
				t.Fatalf("%s changed by a refused PUT (%d bytes)", d, len(got))
			}
		}
		acked = testenv.Within(20*time.Second, func() bool {
			code, msg = put(t, l.url+"/f", v2)
			return code/100 == 2
		})
		if !acked {
			t.Fatalf("PUT after the replica returned = %d %q", code, msg)
		}
		want = v2
	}
	// For 1.2 s, six times the metadata TTL and twelve health intervals,
	// with a restart of the federator half-way: every GET has the
	// acknowledged version.
	for _, span := range []time.Duration{600 * time.Millisecond, 600 * time.Millisecond} {
		n := 0
		for end := time.Now().Add(span); time.Now().Before(end); n++ {
			code, body, err := getBody(l.url + "/f")
			if err != nil || code != 200 || !bytes.Equal(body, want) {
				t.Fatalf("GET %d after the replica returned = %d, %d bytes (v1 %v), %v; want the acknowledged version",
					n, code, len(body), bytes.Equal(body, v1), err)
			}
		}
		l.fed.kill()
		l.fed.start(t)
	}
}
