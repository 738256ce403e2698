package config

import "strings"

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
}
