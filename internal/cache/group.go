package cache

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// A cache group is several cache nodes that keep one copy of each file
// between them. Each path belongs to one node, chosen by rendezvous
// (highest random weight) hashing over the members that are up: the
// owner is the member whose hash of (member, path) is highest. When a
// member goes down only its own paths move, each to the member with the
// next highest weight, and they come back when it does (Thaler and
// Ravishankar, 1998). A node asked for a path it does not own reads it
// from the owner and keeps nothing, so the origin sends each file once
// per group.

// HopHeader marks a request one group member sends another: the owner
// answers it from its own disk, never forwarding it again.
const HopHeader = "X-Lakefed-Cache-Hop"

// Health checking of the members.
const (
	groupProbeInterval = time.Second
	groupProbeTimeout  = 2 * time.Second
)

type member struct {
	url  string // base URL, no trailing slash
	self bool
	up   atomic.Bool
	// seed is the member's part of every weight, hashed once.
	seed uint64
}

type group struct {
	members []*member
	self    *member
	client  *http.Client
	log     *slog.Logger
}

func newGroup(urls []string, self string, client *http.Client, log *slog.Logger) (*group, error) {
	if client == nil {
		client = &http.Client{Timeout: 0}
	}
	g := &group{client: client, log: log}
	self = strings.TrimRight(self, "/")
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("cache: group member %q: want an http(s) base URL", raw)
		}
		m := &member{url: strings.TrimRight(raw, "/")}
		h := fnv.New64a()
		h.Write([]byte(m.url))
		m.seed = h.Sum64()
		m.up.Store(true)
		if m.url == self {
			m.self = true
			g.self = m
		}
		g.members = append(g.members, m)
	}
	if g.self == nil {
		return nil, fmt.Errorf("cache: this node (%q) is not in its group %v", self, urls)
	}
	return g, nil
}

// weight is the rendezvous weight of m for path p: a 64-bit mix of the
// member's seed and the path's hash (splitmix64's finaliser), so every
// member ranks every path independently.
func weight(seed, ph uint64) uint64 {
	z := seed ^ ph
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// owner returns the member that owns p among those up (this node when
// every other is down).
func (g *group) owner(p string) *member {
	h := fnv.New64a()
	h.Write([]byte(p))
	ph := h.Sum64()
	var best *member
	var bw uint64
	for _, m := range g.members {
		if !m.self && !m.up.Load() {
			continue
		}
		if w := weight(m.seed, ph); best == nil || w > bw {
			best, bw = m, w
		}
	}
	return best
}

// run probes the other members until ctx is done.
func (g *group) run(ctx context.Context) {
	t := time.NewTicker(groupProbeInterval)
	defer t.Stop()
	for {
		for _, m := range g.members {
			if !m.self {
				g.probe(ctx, m)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *group) probe(ctx context.Context, m *member) {
	pctx, cancel := context.WithTimeout(ctx, groupProbeTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(pctx, http.MethodGet, m.url+"/api/cache/health", nil)
	resp, err := g.client.Do(req)
	ok := err == nil && resp.StatusCode == http.StatusOK
	if resp != nil {
		resp.Body.Close()
	}
	if ctx.Err() != nil {
		return
	}
	g.mark(m, ok)
}

func (g *group) mark(m *member, up bool) {
	if m.up.Swap(up) != up {
		g.log.Info("cache: group member changed state", "member", m.url, "up", up)
	}
}

// Members reports each member's URL and whether it is up, for the API.
func (g *group) status() []GroupMember {
	out := make([]GroupMember, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, GroupMember{URL: m.url, Self: m.self, Up: m.self || m.up.Load()})
	}
	return out
}

// GroupMember is one node of the cache group as /api/cache shows it.
type GroupMember struct {
	URL  string `json:"url"`
	Self bool   `json:"self"`
	Up   bool   `json:"up"`
}
