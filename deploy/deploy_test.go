// Package deploy holds what a site installs beside the binary (make
// install): the systemd units, the sysusers.d entry of the user they run
// as, and the default config. Its tests install them as make install does
// and check them with the tools systemd ships.
package deploy

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/testenv"
)

// units are the unit files make install installs.
var units = []string{"lakefed.service", "lakefed-storage@.service"}

// repoRoot is the source tree: this package's parent.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// makeInstall runs make install in the source tree with vars
// ("DESTDIR=...") and fails the test if it fails.
func makeInstall(t *testing.T, vars ...string) {
	t.Helper()
	mk := testenv.Require(t, "make")
	testenv.Require(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mk, append([]string{"-C", repoRoot(t), "install"}, vars...)...)
	// Run from make test, the outer make's flags (its jobserver's
	// descriptors) are not this one's.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install %s: %v\n%s", strings.Join(vars, " "), err, out)
	}
}

// run runs a program and returns its output, failing the test if it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// mode checks that path is a regular file of mode want.
func mode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("not installed: %v", err)
		return
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want a regular file of mode %v", path, fi.Mode(), want)
	}
}

// TestDefaultConfig: the config make install puts in /etc/lakefed passes
// lakefed check-config, and keeps every path the service writes under
// /var/lib/lakefed, the one directory its units let it write.
func TestDefaultConfig(t *testing.T) {
	bin := testenv.LakefedBinary(t)
	cfg := filepath.Join(repoRoot(t), "deploy", "lakefed.yaml")
	out := run(t, bin, "check-config", cfg)
	if !strings.Contains(out, ": ok (1 storage servers, federation: true, 1 endpoints)") {
		t.Errorf("check-config %s said %q, want ok with one storage server and the federation", cfg, out)
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(l), "#"), " ")
		for _, key := range []string{"root:", "dir:", "results:"} {
			if v, ok := strings.CutPrefix(l, key); ok && !strings.HasPrefix(strings.TrimSpace(v), "/var/lib/lakefed/") {
				t.Errorf("%s: %q is outside /var/lib/lakefed, which the unit keeps read-only", cfg, l)
			}
		}
	}
}

// TestUnitSettings: the units keep what a site relies on: readiness,
// reload, the lakefed user and the hardening. systemd-analyze (below)
// checks that systemd reads them; this checks what they say.
func TestUnitSettings(t *testing.T) {
	want := []string{
		"Type=notify",
		"ExecReload=/bin/kill -HUP $MAINPID",
		"Restart=on-failure",
		"User=lakefed",
		"Group=lakefed",
		"StateDirectory=lakefed",
		"LimitNOFILE=65536",
		"NoNewPrivileges=yes",
		"ProtectSystem=strict",
		"ReadWritePaths=/var/lib/lakefed",
		"ProtectHome=yes",
		"PrivateTmp=yes",
		"ProtectKernelTunables=yes",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
		"CapabilityBoundingSet=",
		"WantedBy=multi-user.target",
	}
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Errorf("%s: no %q", u, w)
			}
		}
		for _, l := range lines {
			// Binding below 1024 is a site's choice, in a drop-in.
			if strings.HasPrefix(l, "AmbientCapabilities=") {
				t.Errorf("%s: %q: the service needs no capability on its default ports", u, l)
			}
		}
	}
}

// TestMakeInstall: make install DESTDIR=D puts the binary, the units, the
// sysusers.d entry and the config under D with sane modes; the installed
// binary names the commit it was built from; a second install leaves an
// edited config alone; and systemd-analyze verify, with D as the root,
// accepts the units as installed (the binary their ExecStart names is
// there), as does its offline security review.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	makeInstall(t, "DESTDIR="+dest)
	bin := filepath.Join(dest, "usr/local/bin/lakefed")
	unitDir := filepath.Join(dest, "usr/local/lib/systemd/system")
	conf := filepath.Join(dest, "etc/lakefed/lakefed.yaml")
	mode(t, bin, 0o755)
	for _, u := range units {
		mode(t, filepath.Join(unitDir, u), 0o644)
	}
	mode(t, filepath.Join(dest, "etc/sysusers.d/lakefed.conf"), 0o644)
	mode(t, conf, 0o644)

	unit, err := os.ReadFile(filepath.Join(unitDir, "lakefed.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart=/usr/local/bin/lakefed serve /etc/lakefed/lakefed.yaml\n") {
		t.Errorf("installed lakefed.service does not run /usr/local/bin/lakefed serve /etc/lakefed/lakefed.yaml:\n%s", unit)
	}
	// make install stamps the commit (a tree that is no git checkout
	// has none to stamp).
	if head, err := exec.Command("git", "-C", repoRoot(t), "rev-parse", "HEAD").Output(); err == nil && len(head) >= 12 {
		if v := run(t, bin, "version"); !strings.Contains(v, "(commit "+string(head[:12])) {
			t.Errorf("installed lakefed version = %q, want the commit %s", v, head[:12])
		}
	}
	run(t, bin, "check-config", conf)

	// The site's config survives a reinstall.
	edited := []byte("# edited by the site\nstorage:\n  - {listen: '127.0.0.1:9001', root: /var/lib/lakefed/data}\n")
	if err := os.WriteFile(conf, edited, 0o640); err != nil {
		t.Fatal(err)
	}
	makeInstall(t, "DESTDIR="+dest)
	if b, _ := os.ReadFile(conf); !bytes.Equal(b, edited) {
		t.Errorf("make install replaced an existing config:\n%s", b)
	}

	analyze := testenv.Require(t, "systemd-analyze")
	// Under --root, systemd-analyze looks for everything in D: the
	// targets the units order themselves after, and the kill of
	// ExecReload. They come from this host's systemd.
	hostUnits, _ := filepath.Glob("/usr/lib/systemd/system/*.target")
	hostSlices, _ := filepath.Glob("/usr/lib/systemd/system/*.slice")
	if len(hostUnits) == 0 {
		testenv.Missing(t, "no systemd targets in /usr/lib/systemd/system (install the systemd package)")
	}
	for _, src := range append(append(hostUnits, hostSlices...), "/bin/kill") {
		dst := filepath.Join(dest, "usr/lib/systemd/system", filepath.Base(src))
		if src == "/bin/kill" {
			dst = filepath.Join(dest, "bin/kill")
		}
		copyFile(t, src, dst)
	}
	// --recursive-errors=no: a warning about the units themselves (an
	// unknown key, a value systemd ignores) fails too, not only errors.
	out := run(t, analyze, "verify", "--recursive-errors=no", "--root="+dest, "lakefed.service", "lakefed-storage@disk1.service")
	if strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify said:\n%s", out)
	}
	for _, u := range []string{"lakefed.service", "lakefed-storage@disk1.service"} {
		// 2.5 is well inside "OK" (the units score 1.7): a setting
		// dropped by mistake shows up here.
		out := run(t, analyze, "security", "--offline=true", "--threshold=25", "--root="+dest, u)
		if !strings.Contains(out, "Overall exposure level for "+u) {
			t.Errorf("systemd-analyze security %s said:\n%s", u, out)
		}
		t.Logf("%s: %s", u, out[strings.LastIndex(out, "Overall"):])
	}
}

// TestMakeInstallPrefix: make install with another PREFIX and SYSCONFDIR
// (and no DESTDIR) writes the paths it installed to into the units, which
// systemd-analyze verify then checks against this host's systemd.
func TestMakeInstallPrefix(t *testing.T) {
	analyze := testenv.Require(t, "systemd-analyze")
	d := t.TempDir()
	prefix, sysconf := filepath.Join(d, "opt/lakefed"), filepath.Join(d, "etc")
	makeInstall(t, "PREFIX="+prefix, "SYSCONFDIR="+sysconf)
	unitDir := filepath.Join(prefix, "lib/systemd/system")
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(unitDir, u))
		if err != nil {
			t.Fatal(err)
		}
		if rest := strings.ReplaceAll(string(b), sysconf+"/lakefed/", ""); strings.Contains(rest, "/usr/local/bin") || strings.Contains(rest, "/etc/lakefed/") {
			t.Errorf("%s still names /usr/local/bin or /etc/lakefed/ after make install PREFIX=%s SYSCONFDIR=%s", u, prefix, sysconf)
		}
		if !strings.Contains(string(b), "\nExecStart="+prefix+"/bin/lakefed serve "+sysconf+"/lakefed/") {
			t.Errorf("%s: ExecStart does not run %s/bin/lakefed on a config in %s/lakefed", u, prefix, sysconf)
		}
	}
	mode(t, filepath.Join(sysconf, "lakefed/lakefed.yaml"), 0o644)
	// A template is verified as an instance of it.
	out := run(t, analyze, "verify", "--recursive-errors=no",
		filepath.Join(unitDir, "lakefed.service"), filepath.Join(unitDir, "lakefed-storage@disk1.service"))
	if strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify said:\n%s", out)
	}
}

// copyFile copies src to dst, making dst's directory, keeping the mode.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
