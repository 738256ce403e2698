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
// from the owner and keeps nothing, and a node that takes a path over
// fills it from the member that held it before (peer.go), so the origin
// sends each file once per group.

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
	// members is the current membership, replaced whole (never changed
	// in place) when a Membership says it changed; the static list of a
	// config never changes.
	members atomic.Pointer[[]*member]
	self    *member
	client  *http.Client
	log     *slog.Logger
	// dyn finds the live members (through Redis); nil with a static list.
	dyn Membership
}

// Membership is where the nodes of a cache group find each other (Redis,
// package shared): each node keeps itself registered with a heartbeat,
// and the group is the nodes whose registration is live. A node added
// joins with no config change; one that dies leaves when its
// registration runs out.
type Membership interface {
	// Heartbeat registers self for ttl more.
	Heartbeat(ctx context.Context, self string, ttl time.Duration) error
	// Members lists the live registrations.
	Members(ctx context.Context) ([]string, error)
}

// membershipTTL is how long a node's registration lasts without a
// heartbeat (sent every groupProbeInterval): a dead node leaves within
// it.
const membershipTTL = 3 * groupProbeInterval

// newDynamicGroup is a group whose members a Membership finds; it starts
// with this node alone.
func newDynamicGroup(dyn Membership, self string, client *http.Client, log *slog.Logger) (*group, error) {
	g, err := newGroup([]string{self}, self, client, log)
	if err != nil {
		return nil, err
	}
	g.dyn = dyn
	return g, nil
}

// refresh registers this node and takes the live members as the group:
// members it knew keep their state, new ones start up.
func (g *group) refresh(ctx context.Context) {
	if err := g.dyn.Heartbeat(ctx, g.self.url, membershipTTL); err != nil {
		g.log.Warn("cache: group registration failed: serving as the members last seen", "err", err)
		return
	}
	urls, err := g.dyn.Members(ctx)
	if err != nil {
		return
	}
	old := map[string]*member{}
	for _, m := range *g.members.Load() {
		old[m.url] = m
	}
	next := []*member{g.self}
	for _, u := range urls {
		u = strings.TrimRight(u, "/")
		if u == g.self.url {
			continue
		}
		m := old[u]
		if m == nil {
			m = newMember(u)
			g.log.Info("cache: group member joined", "member", u)
		}
		next = append(next, m)
	}
	if len(next) != len(old) {
		g.log.Info("cache: group membership", "members", len(next))
	}
	g.members.Store(&next)
}

func newMember(u string) *member {
	m := &member{url: u}
	h := fnv.New64a()
	h.Write([]byte(m.url))
	m.seed = h.Sum64()
	m.up.Store(true)
	return m
}

func newGroup(urls []string, self string, client *http.Client, log *slog.Logger) (*group, error) {
	if client == nil {
		client = &http.Client{Timeout: 0}
	}
	g := &group{client: client, log: log}
	self = strings.TrimRight(self, "/")
	var members []*member
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("cache: group member %q: want an http(s) base URL", raw)
		}
		m := newMember(strings.TrimRight(raw, "/"))
		if m.url == self {
			m.self = true
			g.self = m
		}
		members = append(members, m)
	}
	g.members.Store(&members)
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
func (g *group) owner(p string) *member { return g.best(p, false) }

// runnerUp returns the member other than this node that would own p
// without it: the owner before this node joined or came back, whose disk
// may still hold p. Nil when no other member is up.
func (g *group) runnerUp(p string) *member { return g.best(p, true) }

// best is the member of highest weight for p among those up; this node
// counts as up unless skipSelf leaves it out.
func (g *group) best(p string, skipSelf bool) *member {
	h := fnv.New64a()
	h.Write([]byte(p))
	ph := h.Sum64()
	var best *member
	var bw uint64
	for _, m := range *g.members.Load() {
		if m.self && skipSelf || !m.self && !m.up.Load() {
			continue
		}
		if w := weight(m.seed, ph); best == nil || w > bw {
			best, bw = m, w
		}
	}
	return best
}

// size is the number of members, up or not.
func (g *group) size() int { return len(*g.members.Load()) }

// run probes the other members until ctx is done.
func (g *group) run(ctx context.Context) {
	t := time.NewTicker(groupProbeInterval)
	defer t.Stop()
	for {
		if g.dyn != nil {
			g.refresh(ctx)
		}
		for _, m := range *g.members.Load() {
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
	ms := *g.members.Load()
	out := make([]GroupMember, 0, len(ms))
	for _, m := range ms {
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
