package buffer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/posix"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// The crash loop's child: the test binary run again with these set.
const (
	childEnv       = "LAKEFED_BUFFER_CRASH_CHILD" // the buffer's Dir
	childTargetEnv = "LAKEFED_BUFFER_CRASH_TARGET"
	childAddrEnv   = "LAKEFED_BUFFER_CRASH_ADDR" // where it writes its address
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		if err := crashChild(dir, os.Getenv(childTargetEnv), os.Getenv(childAddrEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild runs a buffer over dir on a loopback port, migrating to the
// posix targets (directories separated by commas), with the first
// target's directory served as what is behind the buffer (reads of
// retired files), until its stdin closes (the parent is gone) or it is
// killed.
func crashChild(dir, targets, addrFile string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var eps []endpoint.Endpoint
	dirs := strings.Split(targets, ",")
	for i, d := range dirs {
		ep, err := posix.New(ctx, endpoint.Config{Name: fmt.Sprintf("target%d", i), URL: "file://" + d}, quiet)
		if err != nil {
			return err
		}
		eps = append(eps, ep)
	}
	b, err := New(ctx, Config{
		Dir: dir, Parallel: 2, KeepAfterMigration: 50 * time.Millisecond,
		RetryInitial: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Prefixes: []Prefix{{Prefix: "/w", Targets: eps}},
	}, Options{Log: quiet})
	if err != nil {
		return err
	}
	defer b.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/buffer", b.StatusHandler())
	mux.Handle("/", b.Wrap(federated(dirs)))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	go b.Run(ctx)
	tmp := addrFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, addrFile); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// federated stands for the federator behind the child's buffer: a
// DELETE removes the file from every target directory (204, or 404 when
// none had it), anything else reads the first one.
func federated(dirs []string) http.Handler {
	files := http.FileServer(http.Dir(dirs[0]))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			files.ServeHTTP(w, r)
			return
		}
		found := false
		for _, d := range dirs {
			err := os.Remove(filepath.Join(d, filepath.FromSlash(r.URL.Path)))
			switch {
			case err == nil:
				found = true
			case !errors.Is(err, os.ErrNotExist):
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if !found {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// crashWorld is the parent's side: the child it runs, and what the
// writers had acknowledged.
type crashWorld struct {
	t            *testing.T
	dir, scratch string
	targets      []string
	addr         atomic.Pointer[string] // "" while no child is up
	child        *exec.Cmd
	stdin        io.Closer

	mu    sync.Mutex
	acked map[string]string // path → adler32 of its last acknowledged version, "" once deleted
	locks map[string]*sync.Mutex
	puts  atomic.Int64 // acknowledged PUTs
	dels  atomic.Int64 // acknowledged DELETEs
	fails atomic.Int64 // PUTs that got no answer (the child died) and were sent again
	reads atomic.Int64 // read-your-writes checks
}

func (w *crashWorld) startChild() {
	w.t.Helper()
	addrFile := filepath.Join(w.scratch, "addr")
	os.Remove(addrFile)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+w.dir, childTargetEnv+"="+strings.Join(w.targets, ","), childAddrEnv+"="+addrFile)
	logf, err := os.OpenFile(filepath.Join(w.scratch, "child.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		w.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.child, w.stdin = cmd, stdin
	if !testenv.Within(30*time.Second, func() bool {
		a, err := os.ReadFile(addrFile)
		if err == nil {
			s := string(a)
			w.addr.Store(&s)
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(filepath.Join(w.scratch, "child.log"))
		w.t.Fatalf("child did not start within 30s:\n%s", log)
	}
}

func (w *crashWorld) kill() {
	empty := ""
	w.addr.Store(&empty)
	_ = w.child.Process.Signal(syscall.SIGKILL)
	_ = w.child.Wait()
	w.stdin.Close()
}

func (w *crashWorld) url(p string) string {
	a := w.addr.Load()
	if a == nil || *a == "" {
		return ""
	}
	return "http://" + *a + p
}

func (w *crashWorld) pathLock(p string) *sync.Mutex {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.locks[p]
	if l == nil {
		l = &sync.Mutex{}
		w.locks[p] = l
	}
	return l
}

// write PUTs data at p until it is acknowledged, sending the same bytes
// again after a kill: so whatever version of p a killed child may have
// committed without answering is the one acknowledged next.
func (w *crashWorld) write(client *http.Client, p string, data []byte) bool {
	sum := httpx.Adler32Of(data)
	var ok bool
	if !testenv.Within(time.Minute, func() bool {
		u := w.url(p)
		if u == "" {
			return false // between a kill and the restart
		}
		req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(data))
		if len(data)%2 == 0 {
			req.Header.Set("Digest", "adler32="+sum)
		}
		resp, err := client.Do(req)
		if err != nil {
			w.fails.Add(1)
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusCreated, http.StatusNoContent:
			if d := resp.Header.Get("Digest"); d != "adler32="+sum {
				w.t.Errorf("PUT %s: Digest %q, want adler32=%s", p, d, sum)
			}
			w.mu.Lock()
			w.acked[p] = sum
			w.mu.Unlock()
			w.puts.Add(1)
			ok = true
		default:
			w.t.Errorf("PUT %s = %d", p, resp.StatusCode)
		}
		return true
	}) {
		w.t.Errorf("PUT %s: no child answered within a minute", p)
	}
	return ok
}

// remove DELETEs p until the child answers, sending it again after a
// kill; 204 or 404 (deleted before, or by the attempt a kill cut off)
// acknowledge it gone.
func (w *crashWorld) remove(client *http.Client, p string) {
	if !testenv.Within(time.Minute, func() bool {
		u := w.url(p)
		if u == "" {
			return false // between a kill and the restart
		}
		req, _ := http.NewRequest(http.MethodDelete, u, nil)
		resp, err := client.Do(req)
		if err != nil {
			w.fails.Add(1)
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusNoContent, http.StatusNotFound:
			w.mu.Lock()
			w.acked[p] = ""
			w.mu.Unlock()
			w.dels.Add(1)
		default:
			w.t.Errorf("DELETE %s = %d", p, resp.StatusCode)
		}
		return true
	}) {
		w.t.Errorf("DELETE %s: no child answered within a minute", p)
	}
}

// check reads an acknowledged file through the child and compares it
// with its last acknowledged version (404 once deleted), unless a
// writer is at it.
func (w *crashWorld) check(client *http.Client, p string) {
	l := w.pathLock(p)
	if !l.TryLock() {
		return
	}
	defer l.Unlock()
	w.mu.Lock()
	want, ok := w.acked[p]
	w.mu.Unlock()
	u := w.url(p)
	if !ok || u == "" {
		return
	}
	resp, err := client.Get(u)
	if err != nil {
		return // the child died under us
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return
	}
	w.reads.Add(1)
	if want == "" {
		if resp.StatusCode != http.StatusNotFound {
			w.t.Errorf("read-your-deletes: GET %s = %d, want 404", p, resp.StatusCode)
		}
		return
	}
	if resp.StatusCode != 200 || httpx.Adler32Of(body) != want {
		w.t.Errorf("read-your-writes: GET %s = %d, adler32 %s, want 200 and %s", p, resp.StatusCode, httpx.Adler32Of(body), want)
	}
}

// TestCrashLoop: writers PUT files (new ones and new versions of old
// ones) and DELETE some through a buffer in a child process that is
// killed with SIGKILL at random moments (mid-upload, mid-journal,
// mid-migration, mid-verification, mid-retirement, mid-delete) and
// started again, at least 50 times (10 with -short). Between kills,
// acknowledged files are read back through it (404 once deleted). At the
// end every acknowledged file is on the target with the adler32 of its
// last acknowledged version, no deleted one is, and nothing else is, on
// each of two targets.
func TestCrashLoop(t *testing.T) {
	kills := 50
	if testing.Short() {
		kills = 10
	}
	w := &crashWorld{t: t, dir: t.TempDir(), targets: []string{t.TempDir(), t.TempDir()}, scratch: t.TempDir(),
		acked: map[string]string{}, locks: map[string]*sync.Mutex{}}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(client.CloseIdleConnections)

	w.startChild()
	var stop atomic.Bool
	var writers sync.WaitGroup
	const nWriters, pathsEach = 4, 12
	for i := range nWriters {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for !stop.Load() {
				p := fmt.Sprintf("/w/%d/d%d/f%d", i, r.IntN(3), r.IntN(pathsEach))
				n := r.IntN(512 << 10)
				if r.IntN(8) == 0 {
					n = r.IntN(10)
				}
				l := w.pathLock(p)
				l.Lock()
				if r.IntN(6) == 0 {
					w.remove(client, p)
				} else {
					w.write(client, p, randBytes(r, n))
				}
				l.Unlock()
			}
		})
	}
	var checkers sync.WaitGroup
	checkers.Go(func() {
		r := rand.New(rand.NewPCG(99, 1))
		for !stop.Load() {
			p := fmt.Sprintf("/w/%d/d%d/f%d", r.IntN(nWriters), r.IntN(3), r.IntN(pathsEach))
			w.check(client, p)
			time.Sleep(time.Millisecond) // paces the sampling checker: it waits for nothing
		}
	})

	r := rand.New(rand.NewPCG(5, 6))
	for k := range kills {
		// Let each run acknowledge something (a loaded machine may start
		// the child slowly), then kill it a random moment later.
		p0 := w.puts.Load()
		testenv.Within(3*time.Second, func() bool { return w.puts.Load() != p0 })
		time.Sleep(time.Duration(r.IntN(250)) * time.Millisecond) // the random kill moment
		w.kill()
		if k+1 < kills {
			w.startChild()
		}
	}
	// The last run: writers finish what they were sending, then stop.
	w.startChild()
	stop.Store(true)
	writers.Wait()
	checkers.Wait()

	var st Status
	var err error
	if !testenv.Within(60*time.Second, func() bool {
		st = Status{}
		var resp *http.Response
		resp, err = client.Get(w.url("/api/buffer"))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
		}
		return err == nil && st.PendingFiles == 0 && st.HeldFiles == 0 && st.PendingDeletes == 0
	}) {
		t.Fatalf("not everything migrated within 60s of the last restart: %+v %v", st, err)
	}
	w.kill()

	w.mu.Lock()
	defer w.mu.Unlock()
	verified := 0
	for _, target := range w.targets {
		for p, want := range w.acked {
			data, err := os.ReadFile(filepath.Join(target, filepath.FromSlash(p)))
			if want == "" {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("deleted %s is on target %s (%d bytes, %v)", p, target, len(data), err)
				}
				continue
			}
			if err != nil {
				t.Errorf("acknowledged %s is not on target %s: %v", p, target, err)
				continue
			}
			if got := httpx.Adler32Of(data); got != want {
				t.Errorf("%s on target %s: adler32 %s, want %s (its last acknowledged version)", p, target, got, want)
				continue
			}
			verified++
		}
		// Nothing but acknowledged files is on the target (a kill mid-copy
		// may leave the posix kind's hidden temp files, never a visible one).
		err := filepath.WalkDir(target, func(path string, d os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && strings.HasPrefix(d.Name(), ".lakefed-"):
				return filepath.SkipDir // the posix kind's kept checksums
			case d.IsDir() || strings.HasPrefix(d.Name(), posix.TempPrefix):
				return nil
			}
			rel, _ := filepath.Rel(target, path)
			if sum := w.acked["/"+filepath.ToSlash(rel)]; sum == "" {
				t.Errorf("target %s holds %s, which was never acknowledged", target, rel)
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if log, _ := os.ReadFile(filepath.Join(w.scratch, "child.log")); bytes.Contains(log, []byte("DATA RACE")) || bytes.Contains(log, []byte("panic")) {
		t.Errorf("a child failed:\n%s", log)
	}
	if len(w.acked) == 0 || w.reads.Load() == 0 {
		t.Fatalf("nothing was written (%d) or read back (%d)", len(w.acked), w.reads.Load())
	}
	if w.dels.Load() == 0 {
		t.Fatal("nothing was deleted")
	}
	t.Logf("%d kills; %d PUTs and %d DELETEs acknowledged, %d sent again after a kill; %d read-your-writes checks; %d files verified on 2 targets with the adler32 of their last acknowledged version",
		kills, w.puts.Load(), w.dels.Load(), w.fails.Load(), w.reads.Load(), verified)
}
