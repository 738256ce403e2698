package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

// Redis is a redis-server a test started on 127.0.0.1, without
// persistence, in a directory of its own.
type Redis struct {
	*Server
	// Addr is "127.0.0.1:PORT" (or the host StartRedisOn was given);
	// URL is "redis://127.0.0.1:PORT/0" (with a password off the
	// loopback).
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

// StartRedisOn is StartRedis listening on host too (an address of this
// host's, such as a NetNS's Host); Addr and URL name host.
func StartRedisOn(t testing.TB, host string) *Redis {
	t.Helper()
	return StartRedisWith(t, RedisOptions{Bind: host})
}

// RedisOptions are how StartRedisWith starts redis-server.
type RedisOptions struct {
	// Bind is an address it listens on besides the loopback (an address
	// of this host's, such as a NetNS's Host); Addr and URL name it.
	// Redis refuses clients that are not on the loopback unless they
	// give a password (protected mode): URL then carries one, random.
	// Default 127.0.0.1 only.
	Bind string
	// Env is added to its environment (for instance libfaketime's).
	Env []string
}

// StartRedisWith is StartRedis with options.
func StartRedisWith(t testing.TB, o RedisOptions) *Redis {
	t.Helper()
	bin := Require(t, "redis-server")
	host := o.Bind
	if host == "" {
		host = "127.0.0.1"
	}
	dir := t.TempDir()
	bind, auth, userinfo := "127.0.0.1", []string(nil), ""
	if host != bind {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		pw := hex.EncodeToString(b[:])
		bind, auth, userinfo = bind+" "+host, []string{"--requirepass", pw}, ":"+pw+"@"
	}
	var last error
	for range 3 {
		port := FreePort(t)
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		r := &Redis{Server: &Server{Dir: dir, Port: port, host: host, env: o.Env}, dir: dir,
			Addr: addr, URL: "redis://" + userinfo + addr + "/0"}
		r.args = append([]string{bin, "--port", strconv.Itoa(port), "--bind", bind, "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes"}, auth...)
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
