package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestServePprof: the opt-in profiling listener answers pprof requests and
// stops when its context ends.
func TestServePprof(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		servePprof(ctx, ln, slog.New(slog.DiscardHandler))
		close(done)
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "test") {
		t.Errorf("GET /debug/pprof/cmdline = %d %q, want 200 and the test binary's command line", resp.StatusCode, b)
	}
	cancel()
	<-done
	if _, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/"); err == nil {
		t.Error("pprof still answers after cancel")
	}
}

// startStorageChild runs "lakefed storage" on root with args and returns
// it with its base URL ("http://…/"), as it prints it. The test kills it.
func startStorageChild(t *testing.T, root string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(lakefedBin, append([]string{"storage", "--root", root, "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), " at "); ok && strings.HasPrefix(sc.Text(), "lakefed storage: serving ") {
				url <- u
			}
		}
		close(url)
	}()
	select {
	case u, ok := <-url:
		if !ok {
			t.Fatal("lakefed storage printed no URL")
		}
		return cmd, u
	case <-time.After(time.Minute):
		t.Fatal("lakefed storage: no URL within a minute")
	}
	return nil, ""
}

// copyTemp starts the names of the storage role's temp entries.
const copyTemp = httpx.ReservedPrefix + "upload-"

// tempDirs returns the copy temp directories directly in dir.
func tempDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), copyTemp) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestStorageCopyKill9: a collection COPY cut by kill -9 leaves a partial
// copy in a temp directory beside its destination. The storage role
// restarted on the same root removes it once it is older than
// --stale-upload-age, and nothing else: the source is whole and the
// destination, never acknowledged, does not exist.
func TestStorageCopyKill9(t *testing.T) {
	root := t.TempDir()
	const files = 400 // each fsynced by the copy: the kill lands mid-way
	src := map[string][]byte{}
	for i := range files {
		name := fmt.Sprintf("src/d%d/f%03d", i%4, i)
		src[name] = randomFile(t, root, name, 16<<10, uint64(i))
	}
	var left, dst string
	for attempt := 1; left == ""; attempt++ {
		if attempt > 3 {
			t.Fatal("three COPYs finished before the kill could land")
		}
		child, base := startStorageChild(t, root)
		dst = fmt.Sprintf("dst%d", attempt)
		req, err := http.NewRequest("COPY", base+"src", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Destination", base+dst)
		answered := make(chan int, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- 0 // killed
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		testenv.Within(30*time.Second, func() bool { return len(tempDirs(t, root)) > 0 || len(answered) > 0 })
		_ = child.Process.Kill() // SIGKILL
		_ = child.Wait()
		if code := <-answered; code != 0 {
			t.Logf("attempt %d: the COPY answered %d before the kill", attempt, code)
			continue
		}
		if d := tempDirs(t, root); len(d) == 1 {
			left = d[0]
		}
	}
	t.Logf("the kill left %s", left)

	_, _ = startStorageChild(t, root, "--stale-upload-age", "1s")
	var err error
	if !testenv.Within(20*time.Second, func() bool {
		_, err = os.Lstat(filepath.Join(root, left))
		return os.IsNotExist(err)
	}) {
		t.Fatalf("%s still there 20s after the restart with --stale-upload-age 1s (%v), want it swept", left, err)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), copyTemp) {
			t.Errorf("temp entry left: %s", p)
		}
		return nil
	})
	noFile(t, filepath.Join(root, dst))
	for name, data := range src {
		sameFile(t, filepath.Join(root, name), data)
	}
}
