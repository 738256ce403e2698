package storage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Shape of TestCrashKill9DuringPuts.
const (
	crashCycles    = 30
	crashClients   = 8
	crashMaxSize   = 4 << 20
	crashBudget    = 50 * time.Second // stop cycling after this (the test must stay near 60 s)
	crashMinCycles = 10
	crashRootEnv   = "LAKEFED_STORAGE_CRASH_ROOT"
)

// crashNames are the names the clients write: few enough that PUTs
// overwrite each other, sometimes concurrently, in three directories.
var crashNames = []string{"a", "b", "c", "d", "e", "f", "d1/g", "d1/h", "d1/i", "d1/j", "d1/d2/k", "d1/d2/l"}

// putRecord is one PUT the parent sent.
type putRecord struct {
	name       string
	sum        [32]byte
	start, end time.Time // before sending; after the answer (or the failure)
	acked      bool      // answered 2xx: renamed into place before the answer
	failed     bool      // answered non-2xx: never renamed
}

// TestCrashKill9DuringPuts kills the storage role with SIGKILL at 30
// random moments while 8 clients PUT files of 0-4 MiB, restarts it on the
// same directory each time, and checks after every restart:
//   - no ".lakefed-upload-*" file is left (the janitor's start pass, with
//     StaleUploadAge 1 ns, removed the crash's leftovers);
//   - every name holds content some PUT could have left there: the content
//     of an acknowledged PUT that no later-started acknowledged PUT
//     superseded, or of a PUT whose outcome the client never learned, or
//     (only when no PUT to it was acknowledged in the cycle) what it held
//     before the cycle. Anything else (a torn file, content never sent for
//     that name, a lost acknowledged write) fails;
//   - no name outside the ones written appears.
func TestCrashKill9DuringPuts(t *testing.T) {
	if os.Getenv(childEnv) == t.Name() {
		crashChild(t)
		return
	}
	root := t.TempDir()
	data := make([]byte, 2*crashMaxSize)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	have := map[string][32]byte{} // what each name held after the last check; absent: no file
	begin := time.Now()
	var cycles, acked, unknown, leftovers int
	for cycles < crashCycles && time.Since(begin) < crashBudget {
		cycles++
		child, base := startCrashChild(t, root)
		checkNoTemps(t, root, cycles)
		puts := crashLoad(base, data, rng, child)
		if n := countTemps(root); n > 0 {
			leftovers += n
		}
		for _, p := range puts {
			switch {
			case p.acked:
				acked++
			case !p.failed:
				unknown++
			}
		}
		have = checkCrashState(t, root, cycles, puts, have)
		if t.Failed() {
			return
		}
	}
	child, _ := startCrashChild(t, root)
	checkNoTemps(t, root, cycles+1)
	child.Process.Kill()
	child.Wait()
	t.Logf("%d kill -9 cycles in %v: %d PUTs acknowledged, %d cut off by the kill, %d temp files left by the kills and removed at restart",
		cycles, time.Since(begin).Round(time.Millisecond), acked, unknown, leftovers)
	if cycles < crashMinCycles {
		t.Errorf("only %d cycles within %v, want at least %d", cycles, crashBudget, crashMinCycles)
	}
	if acked == 0 || unknown == 0 {
		t.Errorf("%d PUTs acknowledged and %d cut off: the kills did not land during uploads", acked, unknown)
	}
}

// crashChild is the storage role the parent kills: it serves the root
// from crashRootEnv with the tiniest stale age, and prints "READY addr"
// once the janitor's start pass is done.
func crashChild(t *testing.T) {
	s, err := New(Config{Root: os.Getenv(crashRootEnv), StaleUploadAge: time.Nanosecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	<-s.swept
	fmt.Printf("READY %s\n", ln.Addr())
	if err := s.Serve(context.Background(), ln); err != nil { // until killed
		t.Fatal(err)
	}
}

// startCrashChild starts the storage role as a child process on root and
// returns it with its base URL once it is ready.
func startCrashChild(t *testing.T, root string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9DuringPuts$")
	cmd.Env = append(os.Environ(), childEnv+"=TestCrashKill9DuringPuts", crashRootEnv+"="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- addr
				break
			}
		}
		close(ready)
		io.Copy(io.Discard, out)
	}()
	select {
	case addr, ok := <-ready:
		if !ok {
			t.Fatal("storage child exited before it was ready")
		}
		return cmd, "http://" + addr + "/"
	case <-time.After(20 * time.Second):
		t.Fatal("storage child not ready within 20s")
	}
	return nil, ""
}

// crashLoad runs crashClients PUT loops against base and kills child with
// SIGKILL at a random moment within a second; it returns every PUT sent.
func crashLoad(base string, data []byte, rng *rand.Rand, child *exec.Cmd) []putRecord {
	tr := &http.Transport{MaxIdleConnsPerHost: crashClients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	ctx, stop := context.WithCancel(context.Background())
	records := make([][]putRecord, crashClients)
	var wg sync.WaitGroup
	for i := range crashClients {
		seed := rng.Uint64()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for ctx.Err() == nil {
				records[i] = append(records[i], crashPut(ctx, client, base, data, r))
			}
		})
	}
	time.Sleep(time.Duration(20+rng.IntN(980)) * time.Millisecond) // the random kill moment
	child.Process.Kill()
	child.Wait()
	stop()
	wg.Wait()
	var all []putRecord
	for _, rs := range records {
		all = append(all, rs...)
	}
	return all
}

// crashPut sends one PUT of a random name and random content.
func crashPut(ctx context.Context, client *http.Client, base string, data []byte, r *rand.Rand) putRecord {
	size := r.IntN(crashMaxSize + 1)
	off := r.IntN(len(data) - size + 1)
	body := data[off : off+size]
	p := putRecord{name: crashNames[r.IntN(len(crashNames))], sum: sha256.Sum256(body)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+p.name, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	p.start = time.Now()
	resp, err := client.Do(req)
	p.end = time.Now()
	if err != nil {
		return p // the outcome is unknown: the kill may have come before or after the rename
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.acked = resp.StatusCode/100 == 2
	p.failed = !p.acked
	return p
}

// checkCrashState compares what is on disk with what the PUTs of one cycle
// allow (see TestCrashKill9DuringPuts) and returns what is on disk.
func checkCrashState(t *testing.T, root string, cycle int, puts []putRecord, before map[string][32]byte) map[string][32]byte {
	t.Helper()
	now := map[string][32]byte{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), reservedPrefix) {
			return nil
		}
		name, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("cycle %d: %v", cycle, err)
			return nil
		}
		now[filepath.ToSlash(name)] = sha256.Sum256(b)
		return nil
	})
	for name := range now {
		if !isCrashName(name) {
			t.Errorf("cycle %d: unexpected file %q", cycle, name)
		}
	}
	for _, name := range crashNames {
		allowed, why := allowedStates(name, puts, before)
		got, exists := now[name]
		key := "absent"
		if exists {
			key = fmt.Sprintf("%x", got[:8])
		}
		if !allowed[key] {
			t.Errorf("cycle %d: %s is %s, want one of %v (%s)", cycle, name, key, keys(allowed), why)
		}
	}
	return now
}

// allowedStates lists what name may hold after a cycle: "absent" or the
// first 8 bytes of a SHA-256, in hex.
func allowedStates(name string, puts []putRecord, before map[string][32]byte) (map[string]bool, string) {
	allowed := map[string]bool{}
	var mine []putRecord
	anyAcked := false
	for _, p := range puts {
		if p.name == name {
			mine = append(mine, p)
			anyAcked = anyAcked || p.acked
		}
	}
	if !anyAcked {
		if sum, ok := before[name]; ok {
			allowed[fmt.Sprintf("%x", sum[:8])] = true
		} else {
			allowed["absent"] = true
		}
	}
	for _, j := range mine {
		if j.failed {
			continue
		}
		superseded := false
		for _, k := range mine {
			// k was acknowledged and started after j was answered: k's
			// rename came after j's.
			if j.acked && k.acked && k.start.After(j.end) {
				superseded = true
			}
		}
		if !superseded {
			allowed[fmt.Sprintf("%x", j.sum[:8])] = true
		}
	}
	return allowed, fmt.Sprintf("%d PUTs to it this cycle, acknowledged: %v", len(mine), anyAcked)
}

func isCrashName(name string) bool {
	for _, n := range crashNames {
		if n == name {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// countTemps counts the upload temp files under root.
func countTemps(root string) int {
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), uploadPrefix) {
			n++
		}
		return nil
	})
	return n
}

// checkNoTemps fails when an upload temp file is left under root.
func checkNoTemps(t *testing.T, root string, cycle int) {
	t.Helper()
	if n := countTemps(root); n > 0 {
		t.Fatalf("after restart %d: %d %s* files left, want none", cycle, n, uploadPrefix)
	}
}

// TestAllowedStates checks the crash test's judge on small histories.
func TestAllowedStates(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	sum := func(b byte) [32]byte { return [32]byte{b} }
	hex := func(b byte) string { s := sum(b); return fmt.Sprintf("%x", s[:8]) }
	before := map[string][32]byte{"a": sum(9)}
	for _, tc := range []struct {
		name string
		puts []putRecord
		want []string
	}{
		{"nothing sent keeps the old content", nil, []string{hex(9)}},
		{"acked replaces", []putRecord{{name: "a", sum: sum(1), start: at(0), end: at(1), acked: true}}, []string{hex(1)}},
		{"later acked supersedes", []putRecord{
			{name: "a", sum: sum(1), start: at(0), end: at(1), acked: true},
			{name: "a", sum: sum(2), start: at(2), end: at(3), acked: true},
		}, []string{hex(2)}},
		{"overlapping acked: either", []putRecord{
			{name: "a", sum: sum(1), start: at(0), end: at(3), acked: true},
			{name: "a", sum: sum(2), start: at(1), end: at(2), acked: true},
		}, []string{hex(1), hex(2)}},
		{"cut off: old or new", []putRecord{{name: "a", sum: sum(3), start: at(0), end: at(1)}}, []string{hex(3), hex(9)}},
		{"cut off after an ack: either", []putRecord{
			{name: "a", sum: sum(1), start: at(0), end: at(1), acked: true},
			{name: "a", sum: sum(3), start: at(2), end: at(3)},
		}, []string{hex(1), hex(3)}},
		{"refused never lands", []putRecord{{name: "a", sum: sum(4), start: at(0), end: at(1), failed: true}}, []string{hex(9)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := allowedStates("a", tc.puts, before)
			if len(got) != len(tc.want) {
				t.Fatalf("allowedStates = %v, want %v", keys(got), tc.want)
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("allowedStates = %v, want %v", keys(got), tc.want)
				}
			}
		})
	}
}
