package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Proc is a child process (a lakefed role, usually) on a fixed port,
// which a test may kill -9, stop, continue and start again on the same
// port.
//
//	p := &testenv.Proc{Bin: testenv.LakefedBinary(t), Port: port, Log: dir + "/site.log",
//		Args: []string{"storage", "--root", dir, "--listen", "127.0.0.1:" + strconv.Itoa(port)}}
//	p.Start(t)
//	t.Cleanup(p.Kill)
type Proc struct {
	// Bin and Args are the command.
	Bin  string
	Args []string
	// Wrap, when set, runs the command through another one (for
	// instance "ip netns exec NS"), which must exec it in its place.
	Wrap []string
	// Env is added to the test's environment.
	Env []string
	// Host and Port are where it listens once started (Host defaults
	// to 127.0.0.1).
	Host string
	Port int
	// Log receives its output, appended to across restarts.
	Log string
	// NS, when set, is the network namespace it runs in (Wrap is then
	// not needed); the wait for its port dials from inside.
	NS *NetNS

	cmd *exec.Cmd
}

// Start starts the process and waits until it listens, or fails the test.
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	if err := p.TryStart(); err != nil {
		t.Fatal(err)
	}
}

// TryStart is Start returning its failure, for callers outside the test's
// goroutine.
func (p *Proc) TryStart() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	argv := append(append([]string{}, p.Wrap...), p.Bin)
	argv = append(argv, p.Args...)
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	if p.NS != nil {
		p.cmd, dial = p.NS.Command(argv[0], argv[1:]...), p.NS.DialContext
	} else {
		p.cmd = exec.Command(argv[0], argv[1:]...)
		// Killed with the test binary, whatever ends it (a timeout, kill -9).
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if len(p.Env) > 0 {
		p.cmd.Env = append(os.Environ(), p.Env...)
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %v: %w", p.Args, err)
	}
	host := p.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if err := WaitListen(net.JoinHostPort(host, strconv.Itoa(p.Port)), 30*time.Second, dial); err != nil {
		log, _ := os.ReadFile(p.Log)
		p.Kill()
		return fmt.Errorf("%v: %w\n%s", p.Args, err, log)
	}
	return nil
}

// Running reports whether the process was started and not killed.
func (p *Proc) Running() bool { return p.cmd != nil }

// Kill kills the process with SIGKILL (continuing it first: a stopped
// process dies only once continued) and waits for it. Safe to call twice.
func (p *Proc) Kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// Quit sends SIGQUIT, so that a Go process writes every goroutine's
// stack to its log and exits, and waits up to wait for it (then kills
// it). It is how a test that saw a process hang keeps the evidence.
func (p *Proc) Quit(wait time.Duration) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

// Signal sends sig (SIGSTOP, SIGCONT, SIGTERM) to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%v is not running", p.Args)
	}
	return p.cmd.Process.Signal(sig)
}

// LakefedBinary builds cmd/lakefed into the test's temporary directory
// and returns its path.
func LakefedBinary(t testing.TB) string {
	t.Helper()
	goBin := Require(t, "go")
	bin := filepath.Join(t.TempDir(), "lakefed")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/lakefed/lakefed/cmd/lakefed")
	cmd.WaitDelay = 5 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build lakefed: %v\n%s", err, out)
	}
	return bin
}
