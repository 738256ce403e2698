package testenv

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

// Redis is a redis-server a test started on 127.0.0.1, without
// persistence, in a directory of its own.
type Redis struct {
	*Server
	// Addr is "127.0.0.1:PORT"; URL is "redis://127.0.0.1:PORT/0".
	Addr, URL string
	dir       string
	args      []string
}

// StartRedis starts redis-server (Debian's redis-server, Redis 7) on a
// free loopback port, stopped when the test ends. A missing binary skips
// the test, or fails it under LAKEFED_REQUIRE_INTEROP=1.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return StartRedisWith(t, RedisOptions{})
}

// RedisOptions are how StartRedisWith starts redis-server.
type RedisOptions struct {
	// Bind is the address it listens on. Default 127.0.0.1.
	Bind string
	// Env is added to its environment (for instance libfaketime's).
	Env []string
}

// StartRedisWith is StartRedis with options.
func StartRedisWith(t testing.TB, o RedisOptions) *Redis {
	t.Helper()
	bin := Require(t, "redis-server")
	if o.Bind == "" {
		o.Bind = "127.0.0.1"
	}
	// Protected mode takes only loopback clients: on another address
	// (a test's own veth link) every client would be refused.
	protected := "yes"
	if o.Bind != "127.0.0.1" {
		protected = "no"
	}
	dir := t.TempDir()
	var last error
	for range 3 {
		port := FreePort(t)
		addr := net.JoinHostPort(o.Bind, strconv.Itoa(port))
		r := &Redis{Server: &Server{Dir: dir, Port: port, host: o.Bind, env: o.Env}, dir: dir,
			Addr: addr, URL: "redis://" + addr + "/0"}
		r.args = []string{bin, "--port", strconv.Itoa(port), "--bind", o.Bind, "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", protected}
		if last = tryStart(t, r.Server, filepath.Join(dir, "redis.log"), []int{port}, r.args[0], r.args[1:]...); last == nil {
			return r
		}
	}
	t.Fatalf("redis-server: %v", last)
	return nil
}

// Restart starts redis-server again on the same port after Kill or Stop
// (empty: nothing was persisted).
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	if err := tryStart(t, r.Server, filepath.Join(r.dir, "redis.log"), []int{r.Port}, r.args[0], r.args[1:]...); err != nil {
		t.Fatal(err)
	}
}
