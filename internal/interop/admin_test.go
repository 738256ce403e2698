package interop

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/auth/authtest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// netns is a network namespace the test made, joined to this host by a
// veth pair: the host's end has HostIP, the namespace's NSIP, so a
// client run inside (Exec) reaches the host from a non-loopback
// address.
type netns struct {
	name, hostIP, nsIP string
	ip                 string
}

// newNetns makes the namespace and the pair (root and ip(8) needed),
// and removes both when t ends.
func newNetns(t *testing.T) *netns {
	t.Helper()
	ip := testenv.Require(t, "ip")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "network namespaces need root")
	}
	tag := strconv.Itoa(os.Getpid()%10000) + strconv.Itoa(rand.IntN(100))
	n := &netns{name: "lakefed-" + tag, ip: ip}
	hostIf, nsIf := "lfh"+tag, "lfn"+tag
	octet := 1 + rand.IntN(250)
	n.hostIP, n.nsIP = fmt.Sprintf("10.231.%d.1", octet), fmt.Sprintf("10.231.%d.2", octet)
	must := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			testenv.Missing(t, fmt.Sprintf("ip %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	must("netns", "add", n.name)
	t.Cleanup(func() { exec.Command(ip, "netns", "del", n.name).Run() })
	must("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	t.Cleanup(func() { exec.Command(ip, "link", "del", hostIf).Run() })
	must("link", "set", nsIf, "netns", n.name)
	must("addr", "add", n.hostIP+"/30", "dev", hostIf)
	must("link", "set", hostIf, "up")
	must("netns", "exec", n.name, "ip", "addr", "add", n.nsIP+"/30", "dev", nsIf)
	must("netns", "exec", n.name, "ip", "link", "set", nsIf, "up")
	must("netns", "exec", n.name, "ip", "link", "set", "lo", "up")
	return n
}

// curl runs curl inside the namespace with args and returns the HTTP
// status ("000" for none) and the body.
func (n *netns) curl(t *testing.T, curl string, args ...string) (string, string) {
	t.Helper()
	body := filepath.Join(t.TempDir(), "body")
	all := append([]string{"netns", "exec", n.name, curl, "-sS", "-o", body, "-w", "%{http_code}", "--max-time", "20"}, args...)
	var stderr strings.Builder
	cmd := exec.Command(n.ip, all...)
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	b, _ := os.ReadFile(body)
	return strings.TrimSpace(string(out)), string(b) + stderr.String()
}

// TestAdminAndOperatorFromAnotherHost: a lakefed serve process whose
// federator listens on a veth address, called by curl from a network
// namespace (a client that is not on loopback). POST /api/reload
// succeeds with a token holding the admin scope, and is refused (403)
// without a token, with a read-only token and with a certificate that
// is an operator but no admin. /api/endpoints and /metrics are refused
// anonymously (401) and to the read-only token (403), and shown to the
// operator's certificate and to the admin.
func TestAdminAndOperatorFromAnotherHost(t *testing.T) {
	curl := testenv.Require(t, "curl")
	ns := newNetns(t)
	bin := lakefedBinary(t)
	is := authtest.NewIssuer(t)
	v := authtest.NewVOMS(t, testenv.Require(t, "voms-proxy-fake"))
	srvTLS := testenv.NewTLS(t)
	dir := t.TempDir()
	sitePort, fedPort := testenv.FreePort(t), testenv.FreePort(t)
	cfg := fmt.Sprintf(`listen: %[1]s:%[2]d
tls_cert: %[3]s
tls_key: %[4]s
storage:
  - {listen: 127.0.0.1:%[5]d, root: %[6]s}
federation:
  endpoints:
    - {name: site-a, url: "http://127.0.0.1:%[5]d/"}
auth:
  ca_file: %[7]s
  issuers:
    - {issuer: "%[8]s"}
  rules:
    - {prefix: /, anonymous: [read, list]}
operator:
  identities: ["%[9]s"]
`, ns.hostIP, fedPort, srvTLS.CertFile, srvTLS.KeyFile, sitePort, dir, v.CAFile, is.URL, v.UserDN)
	cfgFile := filepath.Join(t.TempDir(), "lakefed.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "lakefed.log")
	lf, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgFile)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); lf.Close() })
	fedAddr := net.JoinHostPort(ns.hostIP, strconv.Itoa(fedPort))
	if !testenv.Within(30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", fedAddr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("the federator does not listen on %s:\n%s", fedAddr, log)
	}

	// The server's certificate names localhost: curl is told where
	// localhost is.
	base := "https://localhost:" + strconv.Itoa(fedPort)
	tlsArgs := []string{"--cacert", srvTLS.CAFile, "--resolve", "localhost:" + strconv.Itoa(fedPort) + ":" + ns.hostIP}
	admin := is.Token(t, "openid lakefed.admin", time.Hour)
	reader := is.Token(t, "storage.read:/", time.Hour)
	operatorCert := catPEM(t, v.UserCert, v.UserKey)
	bearer := func(tok string) []string { return []string{"-H", "Authorization: Bearer " + tok} }
	cert := []string{"--cert", operatorCert, "--key", operatorCert}
	reload := func(cred ...string) (string, string) {
		args := append(append(append([]string{}, tlsArgs...), cred...),
			"-X", "POST", "-H", "Content-Type: application/json", "-d", "{}", base+"/api/reload")
		return ns.curl(t, curl, args...)
	}
	get := func(path string, cred ...string) string {
		code, _ := ns.curl(t, curl, append(append(append([]string{}, tlsArgs...), cred...), base+path)...)
		return code
	}

	if code, body := reload(bearer(admin)...); code != "200" || !strings.Contains(body, `"status":"reloaded"`) {
		log, _ := os.ReadFile(logFile)
		t.Errorf("POST /api/reload from %s with the admin token = %s %s, want 200 reloaded\n%s", ns.nsIP, code, body, log)
	}
	for _, c := range []struct {
		name string
		cred []string
	}{
		{"no credentials", nil},
		{"a read-only token", bearer(reader)},
		{"an operator's certificate", cert},
	} {
		if code, body := reload(c.cred...); code != "403" {
			t.Errorf("POST /api/reload from %s with %s = %s %s, want 403", ns.nsIP, c.name, code, body)
		}
	}
	for _, p := range []string{"/api/endpoints", "/metrics"} {
		for _, c := range []struct {
			name string
			cred []string
			want string
		}{
			{"anonymous", nil, "401"},
			{"a read-only token", bearer(reader), "403"},
			{"the operator's certificate", cert, "200"},
			{"the admin token", bearer(admin), "200"},
		} {
			if code := get(p, c.cred...); code != c.want {
				t.Errorf("GET %s from %s, %s = %s, want %s", p, ns.nsIP, c.name, code, c.want)
			}
		}
	}
	// Liveness probes stay open: they say "ok" only.
	if code := get("/api/health"); code != "200" {
		t.Errorf("GET /api/health from %s = %s, want 200", ns.nsIP, code)
	}
}

// catPEM writes the files' contents one after the other to a new file
// of mode 0600 and returns it.
func catPEM(t *testing.T, files ...string) string {
	t.Helper()
	var b []byte
	for _, f := range files {
		c, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, c...)
	}
	p := filepath.Join(t.TempDir(), "cred.pem")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
