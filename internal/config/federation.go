package config

import (
	"github.com/lakefed/lakefed/internal/endpoint"
)

// Federation is the federator: one namespace over many endpoints.
type Federation struct {
	// Mode is how GET is answered: "redirect" (302 to the best replica,
	// the default) or "proxy" (the federator streams the bytes). An
	// endpoint may override it; endpoints clients cannot reach (file://)
	// are always proxied.
	Mode string `yaml:"mode"`
	// Placement picks the endpoint a PUT goes to: "priority" (the first
	// healthy writable endpoint by priority, the default) or "spread"
	// (round-robin over the healthy writable endpoints of the best
	// priority, to balance load).
	Placement string `yaml:"placement"`
	// GeoIPDB is a MaxMind GeoIP2/GeoLite2 City database used to locate
	// clients for proximity ranking. Empty: ClientNetworks only.
	GeoIPDB string `yaml:"geoip_db"`
	// ClientNetworks map client address ranges to locations, used when
	// GeoIPDB is empty or does not know the client.
	ClientNetworks []ClientNetwork `yaml:"client_networks"`
	// FuzzKM is the distance within which replicas count as equally near,
	// so load spreads randomly among them (as Dynafed's fuzz does).
	// Default 100 km; a negative value turns spreading by distance off.
	FuzzKM float64 `yaml:"fuzz_km"`
	// FuzzLatency is the same for recent latency. Default 5ms.
	FuzzLatency Duration `yaml:"fuzz_latency"`
	// MaxHops bounds how many federators a request may pass through
	// (X-Lakefed-Hops); a federator reached at MaxHops asks no upstream.
	// Default 3.
	MaxHops int `yaml:"max_hops"`
	// RetryAfter is sent with 503 answers. Default 10s.
	RetryAfter Duration `yaml:"retry_after"`
	// ProxyIdleTimeout bounds the wait for the next bytes of a proxied
	// read: a replica silent for this long (a stalled server, kill -STOP)
	// is left, and the read goes on from another replica holding the
	// same bytes at the same offset. Default 5s.
	ProxyIdleTimeout Duration `yaml:"proxy_idle_timeout"`
	// MetadataCache bounds the cache of locate answers.
	MetadataCache MetadataCache `yaml:"metadata_cache"`
	// Health configures active probes and passive failure counting.
	Health Health `yaml:"health"`
	// Endpoints are the storage endpoints federated. At least one.
	Endpoints []Endpoint `yaml:"endpoints"`
	// Admin says who may call the federator's admin API (POST
	// /api/reload, its one changing endpoint).
	Admin Admin `yaml:"admin"`

	// RestartNeeded is not read from the file: package server fills it,
	// when it reloads the file, with the settings that changed but are
	// read only at start (RestartChanges), so that the reload answer can
	// say so. Nil: none.
	RestartNeeded []string `yaml:"-"`
}

// Admin says who may call the admin API: a bearer token with Scope, or a
// caller named in Identities (both verified by the auth section), from
// anywhere; and, when AllowLoopback, any client on the federator's own
// host. Everyone else gets 403, a read-only token included. Whoever
// calls, the request must come from a page of the federator's own
// origin, if from a page at all (see federation's reload handler).
//
//	federation:
//	  admin: {scope: lakefed.admin, identities: ["/DC=org/DC=example/CN=Ops"], allow_loopback: false}
type Admin struct {
	// Scope is the token scope that makes its holder an admin. Default
	// "lakefed.admin".
	Scope string `yaml:"scope"`
	// Identities are the admins: certificate DNs in OpenSSL slash form,
	// or "ISSUER/SUB" of tokens, as auth rules name them.
	Identities []string `yaml:"identities"`
	// AllowLoopback lets clients on the federator's host (127.0.0.0/8,
	// ::1) call the admin API without credentials. Default true (the
	// demo reloads with a bare curl); false makes them show credentials
	// too.
	AllowLoopback *bool `yaml:"allow_loopback"`
}

// DefaultAdminScope is Admin.Scope's default.
const DefaultAdminScope = "lakefed.admin"

// LoopbackAllowed reports whether loopback clients need no credentials.
func (a Admin) LoopbackAllowed() bool { return a.AllowLoopback == nil || *a.AllowLoopback }

// ClientNetwork places the clients of some address ranges.
type ClientNetwork struct {
	// Networks are CIDR prefixes ("10.0.0.0/8", "2001:db8::/32").
	Networks []string `yaml:"networks"`
	// Location is [latitude, longitude] in degrees. Required.
	Location Location `yaml:"location"`
}

// MetadataCache bounds the federator's cache of locate answers.
type MetadataCache struct {
	// MaxEntries is the most paths kept; the least recently used go
	// first. Default 100000.
	MaxEntries int `yaml:"max_entries"`
	// TTL is how long a found path is trusted. Default 60s.
	TTL Duration `yaml:"ttl"`
	// NegativeTTL is how long "found nowhere" is trusted. Default 5s;
	// "0s" is taken as the default too, use a tiny value such as 1ms to
	// turn it nearly off.
	NegativeTTL Duration `yaml:"negative_ttl"`
	// Hot is how many entries are kept unpacked, ready to answer a
	// redirect without building its headers again. Every entry is kept
	// packed (about 160 bytes for a file on three sites); an entry read
	// again is kept unpacked too (about 1.2 KiB more) while it stays
	// among the Hot most read. A warm redirect of a path beyond them
	// costs about 1 µs more. Default 16384; at most max_entries.
	Hot int `yaml:"hot"`
	// ListAfter is how many look-ups of new paths in one directory of an
	// endpoint, within negative_ttl, make the federator list that
	// directory once and answer the look-ups that follow there from the
	// listing, rather than with a Stat of each path on each endpoint (jobs
	// read a directory file by file). Only kinds whose listing is proven
	// to say what Stat says of each file are listed (the http kind against
	// a lakefed storage role, the root:// kind against an XRootD data
	// server; not nginx, XrdHttp, an XRootD redirector, a lakefed door,
	// S3 or POSIX). A listing answers for negative_ttl after it was taken, only for the files it
	// names (a name it lacks is asked with Stat: the file may have been
	// written at the site since); an answer from it is cached no longer
	// than one from a Stat made when it was taken, and a path written
	// through the lake since is asked with Stat. Default 2: a file read alone
	// is asked as before, and the second new path of its directory lists
	// it; 1 lists on the first look-up; -1 never lists.
	ListAfter int `yaml:"list_after"`
	// ListMaxEntries is the most entries of a directory listed: a larger
	// one is looked up a path at a time. Listings of up to 8 times this
	// many entries in all are kept. Default 10000.
	ListMaxEntries int `yaml:"list_max_entries"`
}

// Health configures how endpoints are marked down and up again.
type Health struct {
	// Interval between active probes of each endpoint. Default 2s: a
	// probe that fails fast (a refused connection) is repeated at once,
	// so a dead site is excluded within one interval.
	Interval Duration `yaml:"interval"`
	// Timeout is the probe's latency limit: a probe slower than this
	// failed. Default 2s.
	Timeout Duration `yaml:"timeout"`
	// FailAfter consecutive failed probes mark an endpoint down.
	// Default 2.
	FailAfter int `yaml:"fail_after"`
	// ErrorLimit consecutive request errors (unavailable answers to real
	// requests) mark an endpoint down. Default 5.
	ErrorLimit int `yaml:"error_limit"`
	// RecoverAfter consecutive good probes mark a down endpoint up.
	// Default 2.
	RecoverAfter int `yaml:"recover_after"`
}

// Endpoint is one federated endpoint. The connection fields (name, url,
// timeout, ca_file, ...) are endpoint.Config's, inline.
type Endpoint struct {
	endpoint.Config `yaml:",inline"`
	// Prefix is the part of the federated namespace the endpoint holds.
	// Default "/".
	Prefix string `yaml:"prefix"`
	// Path is where Prefix lives on the endpoint, relative to the URL.
	// Default "/" (the URL's own path).
	Path string `yaml:"path"`
	// Priority ranks replicas: lower is preferred. Default 1 (zero means
	// the default).
	Priority int `yaml:"priority"`
	// Location is [latitude, longitude] in degrees, for proximity
	// ranking. Empty: unknown (ranked after located replicas at equal
	// priority when the client's location is known).
	Location Location `yaml:"location"`
	// Writable lets PUT, DELETE and MKCOL reach the endpoint.
	Writable bool `yaml:"writable"`
	// Mode overrides Federation.Mode for this endpoint: "redirect" or
	// "proxy". Empty: inherit.
	Mode string `yaml:"mode"`
}

// Location is a [latitude, longitude] pair in degrees; empty when unknown.
type Location []float64

// Known reports whether l holds a position.
func (l Location) Known() bool { return len(l) == 2 }

// EffectiveMode returns the endpoint's mode: its own, else the
// federation's.
func (e *Endpoint) EffectiveMode(f *Federation) string {
	if e.Mode != "" {
		return e.Mode
	}
	return f.Mode
}
