package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Postgres is a PostgreSQL server (Debian's postgresql, 15) a test
// started on 127.0.0.1 in a fresh data directory, with trust
// authentication for the user "lake" on loopback only.
type Postgres struct {
	*Server
	// URL is postgres://lake@127.0.0.1:PORT/postgres?sslmode=disable.
	URL  string
	args []string
	dir  string
	dbs  atomic.Int32
}

// postgresBin is the directory of the newest PostgreSQL server
// installed (/usr/lib/postgresql/N/bin), or "".
func postgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { // 9 < 10 < 15
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a < b
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

// StartPostgres initialises a database cluster in a temporary directory
// and starts PostgreSQL on a free loopback port, stopped and removed when
// the test ends. PostgreSQL refuses to run as root: as root it runs as
// the postgres user. A missing server skips the test, or fails it under
// LAKEFED_REQUIRE_INTEROP=1.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		Missing(t, "PostgreSQL not installed (apt-get install postgresql; run scripts/install-deps.sh)")
	}
	// Not t.TempDir: its parents are 0700 root, and the server's user
	// must reach its data directory.
	dir, err := os.MkdirTemp("", "lakefed-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	as := asPostgres(t, dir)
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "lake", "--no-sync")
	initdb.SysProcAttr = as
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	var last error
	for range 3 {
		port := FreePort(t)
		p := &Postgres{Server: &Server{Dir: data, Port: port}, dir: dir,
			URL: fmt.Sprintf("postgres://lake@127.0.0.1:%d/postgres?sslmode=disable", port)}
		// fsync off: a test's database need not survive a power cut, and
		// fsync is most of PostgreSQL's time on a loaded machine.
		p.args = []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
		if last = p.start(t, bin, as); last == nil {
			return p
		}
	}
	t.Fatalf("postgres: %v", last)
	return nil
}

// asPostgres is the credential PostgreSQL runs with: the postgres user
// when the test runs as root (dir is then given to it), else nil.
func asPostgres(t testing.TB, dir string) *syscall.SysProcAttr {
	t.Helper()
	if os.Geteuid() != 0 {
		return &syscall.SysProcAttr{Setpgid: true}
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		Missing(t, "no postgres user to run PostgreSQL as (apt-get install postgresql)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

func (p *Postgres) start(t testing.TB, bin string, as *syscall.SysProcAttr) error {
	t.Helper()
	log := filepath.Join(p.dir, "postgres.log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), p.args...)
	cmd.SysProcAttr = as
	cmd.Stdout, cmd.Stderr = f, f
	p.log, p.bin = log, cmd.Path
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	p.cmd = cmd
	t.Cleanup(p.Stop)
	// The port opens before the server takes connections ("the database
	// system is starting up"): pg_isready says when it does.
	ready := func() bool {
		return exec.Command(filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port)).Run() == nil
	}
	if !Within(30*time.Second, ready) {
		out, _ := os.ReadFile(log)
		p.Stop()
		return fmt.Errorf("postgres did not start\n%s", out)
	}
	return nil
}

// Signal sends sig to the postmaster (SIGKILL, SIGSTOP, SIGCONT).
func (p *Postgres) Signal(sig syscall.Signal) error {
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("postgres is not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Kill kills PostgreSQL with SIGKILL, the postmaster and every backend
// (a crash of the server: killing the postmaster alone leaves the
// backends serving their connections for a while).
func (p *Postgres) Kill() error {
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("postgres is not running")
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Restart starts PostgreSQL again on the same port and data directory
// after Stop or a kill (its crash recovery runs first).
func (p *Postgres) Restart(t testing.TB) {
	t.Helper()
	if p.cmd != nil && p.cmd.Process != nil {
		// The postmaster's children outlive a SIGKILL of it for a moment
		// and hold the shared memory: the group goes with it.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	_ = os.Remove(filepath.Join(p.Dir, "postmaster.pid"))
	if err := p.start(t, postgresBin(), asPostgres(t, p.dir)); err != nil {
		t.Fatal(err)
	}
}

// NewDatabase creates an empty database of its own for a test and
// returns its URL.
func (p *Postgres) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", p.dbs.Add(1))
	psql := exec.Command(filepath.Join(postgresBin(), "psql"), "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port),
		"-U", "lake", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE "+name)
	if out, err := psql.CombinedOutput(); err != nil {
		t.Fatalf("create database %s: %v\n%s", name, err, out)
	}
	return fmt.Sprintf("postgres://lake@127.0.0.1:%d/%s?sslmode=disable", p.Port, name)
}
