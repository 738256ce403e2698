package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NetNS is a network namespace a test made, joined to the host by a veth
// pair on a /30 of its own: a process run in it (Command) reaches the
// host only at Host, and the test reaches the namespace's loopback by
// dialing from inside it (DialContext). Cut partitions it: the link
// goes down and what crosses it is dropped; Heal brings it up. The namespace and both
// ends of the link are removed when the test ends.
//
//	ns := testenv.NewNetNS(t)
//	cmd := ns.Command("lakefed", "serve", cfg) // its Redis and sites listen on ns.Host
//	ns.Cut(t)                                  // it reaches nothing
//	ns.Heal(t)
type NetNS struct {
	// Name is the namespace's name (ip netns).
	Name string
	// Host is the address of the host's end of the link, Inner that of
	// the namespace's end.
	Host, Inner string
	ip          string
	hostIf      string
	innerIf     string
}

// nsPrefix names the namespaces tests make; the creator's pid follows,
// so that those of a test binary that was killed can be told and
// removed.
const nsPrefix = "lakefed-test-"

// NewNetNS makes a network namespace and its link. It needs root: without
// it the test is skipped, or fails under LAKEFED_REQUIRE_INTEROP=1. As
// root, anything missing (ip, from iproute2) or failing fails the test.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "network namespaces need root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("testenv: network namespaces need ip (iproute2): %v", err)
	}
	n := &NetNS{ip: ip}
	removeStaleNetNS(n.ip)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:])
	n.Name = nsPrefix + strconv.Itoa(os.Getpid()) + "-" + id
	n.hostIf, n.innerIf = "lft"+id+"h", "lft"+id+"n" // at most 15 bytes, as interface names must be
	net3, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	n.Host, n.Inner = net3+".1", net3+".2"
	if err := n.run("netns", "add", n.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.remove)
	for _, args := range [][]string{
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", n.innerIf},
		{"link", "set", n.innerIf, "netns", n.Name},
		{"addr", "add", n.Host + "/30", "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.Name, "addr", "add", n.Inner + "/30", "dev", n.innerIf},
		{"-n", n.Name, "link", "set", n.innerIf, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if err := n.run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *NetNS) run(args ...string) error {
	out, err := exec.Command(n.ip, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// remove deletes the namespace, and with it its end of the link and so
// the other end; the host's end is deleted too, in case.
func (n *NetNS) remove() {
	_ = n.run("netns", "del", n.Name)
	_ = n.run("link", "del", n.hostIf)
	_ = n.run("route", "del", "blackhole", n.Inner+"/32")
}

// removeStaleNetNS removes the namespaces of test binaries that no
// longer run (killed before their cleanup).
func removeStaleNetNS(ip string) {
	names, _ := filepath.Glob(filepath.Join("/run/netns", nsPrefix+"*"))
	for _, p := range names {
		name := filepath.Base(p)
		pid, _, _ := strings.Cut(strings.TrimPrefix(name, nsPrefix), "-")
		if _, err := os.Stat(filepath.Join("/proc", pid)); err == nil {
			continue
		}
		_ = exec.Command(ip, "netns", "del", name).Run()
	}
}

// freeSubnet picks a /30 in 10.0.0.0/8 that no address of this host is
// in, and returns its first three bytes ("10.x.y"; the /30 is .0-.3).
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for range 100 {
		v, err := rand.Int(rand.Reader, big.NewInt(1<<16))
		if err != nil {
			return "", err
		}
		x, y := 64+v.Int64()>>8%128, v.Int64()&0xff
		prefix := fmt.Sprintf("10.%d.%d.", x, y)
		taken := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (strings.HasPrefix(ipn.IP.String(), prefix) || ipn.Contains(net.ParseIP(prefix+"1"))) {
				taken = true
			}
		}
		if !taken {
			return strings.TrimSuffix(prefix, "."), nil
		}
	}
	return "", fmt.Errorf("testenv: no free /30 in 10.0.0.0/8")
}

// Cut partitions the namespace: the host's end of the link goes down,
// so that nothing crosses it either way and packets are dropped, as on a
// cut cable (the namespace's end keeps its route, marked linkdown). With
// its link down the host would send what it addresses to Inner along its
// default route instead; a blackhole route for Inner keeps those packets
// on the host and drops them too. (On a machine whose outbound traffic
// is intercepted, the default route reached something that answered in
// the namespace's place.)
func (n *NetNS) Cut(t testing.TB) {
	t.Helper()
	if err := n.SetLink(false); err != nil {
		t.Fatal(err)
	}
}

// Heal ends the partition Cut made.
func (n *NetNS) Heal(t testing.TB) {
	t.Helper()
	if err := n.SetLink(true); err != nil {
		t.Fatal(err)
	}
}

// SetLink cuts (up false) or heals (up true) the link, as Cut and Heal
// do, for callers that cannot stop the test on an error (a fault
// schedule running in its own goroutine).
func (n *NetNS) SetLink(up bool) error {
	if !up {
		if err := n.run("route", "replace", "blackhole", n.Inner+"/32"); err != nil {
			return err
		}
		return n.run("link", "set", n.hostIf, "down")
	}
	if err := n.run("link", "set", n.hostIf, "up"); err != nil {
		return err
	}
	if err := n.run("route", "del", "blackhole", n.Inner+"/32"); err != nil && !strings.Contains(err.Error(), "No such process") {
		return err
	}
	return nil
}

// Command is a command run in the namespace (ip netns exec, which execs
// it: the process is the command itself). It is killed when the test
// binary dies, however that happens (Pdeathsig), so that no process is
// left running in a namespace that is gone.
func (n *NetNS) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(n.ip, append([]string{"netns", "exec", n.Name, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// DialContext dials addr from inside the namespace: the socket is made
// on a thread that joined it, and the thread goes back to the test's
// namespace before it runs anything else (it is dropped when it cannot).
func (n *NetNS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		runtime.LockOSThread()
		c, back, err := n.dialInside(ctx, network, addr)
		if back {
			runtime.UnlockOSThread()
		} // else the thread ends with the goroutine, in the namespace
		ch <- dialed{c, err}
	}()
	d := <-ch
	return d.c, d.err
}

// dialInside joins the namespace on the calling (locked) thread, dials,
// and joins the thread's own namespace again; back says it did.
func (n *NetNS) dialInside(ctx context.Context, network, addr string) (net.Conn, bool, error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(filepath.Join("/run/netns", n.Name))
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("testenv: join %s: %w", n.Name, err)
	}
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	back := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil
	return c, back, err
}
