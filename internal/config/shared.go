package config

import (
	"net"
	"net/url"
	"os"
	"strings"
)

// GroupShared, as the one value of cache.group, makes the cache group the
// nodes registered in the shared section's Redis.
const GroupShared = "shared"

// What Shared.WritesWhenDegraded may say.
const (
	// WritesRefuse refuses writes (503 with Retry-After) while Redis
	// cannot be reached: every write is seen by every federator.
	WritesRefuse = "refuse"
	// WritesLocal takes writes anyway; the other federators see them
	// when their metadata expires.
	WritesLocal = "local"
)

// Shared is the state the processes of a lake share through Redis
// (package internal/shared): several federators behind one name see each
// other's writes before they are acknowledged and share their metadata.
//
//	shared:
//	  redis: redis://127.0.0.1:6379/0
//	  writes_when_degraded: refuse   # refuse (503) | local
//	  lease: 3s
//	  advertise: http://fed-1.example.org:8080
type Shared struct {
	// Redis is the Redis URL, redis://HOST:PORT/DB (Redis 7). Required.
	Redis string `yaml:"redis"`
	// WritesWhenDegraded is "refuse" (the default: 503 while Redis
	// cannot be reached) or "local" (write anyway, seen elsewhere only
	// when the others' metadata expires).
	WritesWhenDegraded string `yaml:"writes_when_degraded"`
	// Lease is how long a process is trusted by the others without
	// renewing its membership: a writer waits at most this long for a
	// process that stopped answering. Zero: 3s. At least 300ms.
	Lease Duration `yaml:"lease"`
	// Node names this process among those sharing Redis; it must be
	// unique. Empty: the host name, the pid and a random suffix.
	Node string `yaml:"node"`
	// Advertise is the URL the other processes of the lake reach this
	// one's federator at, http(s)://HOST:PORT: a federator that finds a
	// file this process's write buffer holds (acknowledged, not yet on
	// its targets) sends the file's readers and writers there. Empty:
	// the listen address, https with tls_cert, and this machine's host
	// name when listen's host is a wildcard (0.0.0.0, ::). Each process
	// of the lake must have its own. Only with a federation section.
	Advertise string `yaml:"advertise"`
}

// setAdvertise defaults Advertise to the federator's listen address.
func (s *Shared) setAdvertise(listen string, tls bool) {
	if s == nil || s.Advertise != "" || listen == "" {
		s.trimAdvertise()
		return
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return // Validate reports listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			host = "localhost"
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	s.Advertise = scheme + "://" + net.JoinHostPort(host, port)
}

// trimAdvertise drops a trailing slash: Advertise is a base URL that
// paths are appended to, and processes compare it as given.
func (s *Shared) trimAdvertise() {
	if s != nil {
		s.Advertise = strings.TrimSuffix(s.Advertise, "/")
	}
}

func (s *Shared) setDefaults() {
	if s == nil {
		return
	}
	if s.WritesWhenDegraded == "" {
		s.WritesWhenDegraded = WritesRefuse
	}
	if s.Lease == 0 {
		s.Lease = Duration(3e9)
	}
}

func (s *Shared) validate(v *validator, path string) {
	if s == nil {
		return
	}
	if !strings.HasPrefix(s.Redis, "redis://") && !strings.HasPrefix(s.Redis, "rediss://") {
		v.errorf(path+".redis", "want redis://HOST:PORT/DB, got %q", s.Redis)
	}
	switch s.WritesWhenDegraded {
	case WritesRefuse, WritesLocal:
	default:
		v.errorf(path+".writes_when_degraded", "want refuse or local, got %q", s.WritesWhenDegraded)
	}
	if s.Lease.D() < 300e6 {
		v.errorf(path+".lease", "at least 300ms, got %v", s.Lease.D())
	}
	if s.Advertise != "" {
		u, err := url.Parse(s.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			v.errorf(path+".advertise", "want http(s)://HOST:PORT, the federator's URL as the other processes reach it, got %q", s.Advertise)
		}
	}
}
