package federation

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/shared"
)

// Files another process holds. A write buffer of the lake (package
// buffer, in another federator's process) takes writes under its
// prefixes, acknowledges them once durable on its disk, and carries them
// to its targets later: until then the endpoints hold an older version,
// or nothing, or a file it took the delete of. It records what it holds
// in the shared state (a hold, shared.Hold) before it acknowledges, and
// this federator, for a path another process holds:
//
//   - reads the holder's version only: the holder is the path's one
//     replica (a member of its own, peer), which readers are redirected
//     to or proxied from; a proxied read is checked against the size and
//     the strong ETag the holder recorded (failoverReader), so bytes of
//     another version are never sent;
//   - answers 404 when the holder took a delete, whatever the endpoints
//     still hold; and 503, never 404 and never the endpoints' version,
//     while the holder is not a live member (it died holding the file:
//     it takes it up again when it restarts);
//   - sends writes (PUT, DELETE) to the holder, which takes them over
//     its version: written on the endpoints instead, they would be
//     undone when the holder's version arrives there; refused with 503
//     while the holder is not live. A move from or to a held path is
//     refused, as the holder refuses one.
//
// A hold of this process's own (Options.Self) is not followed: the
// buffer in front of this federator answers for it.

// holder returns the hold another process has on p, or nil: none, this
// process's own, or the shared state cannot be asked (Degraded: reads go
// on from the endpoints, and writes are refused anyway).
func (f *Federator) holder(ctx context.Context, s *snapshot, p string) *shared.Hold {
	sh := f.opts.Shared
	if sh == nil || s.root != nil { // a view pinned to one endpoint asks only it
		return nil
	}
	h, err := sh.LoadHold(ctx, p)
	if err != nil || h == nil || h.Owner == f.opts.Self {
		return nil
	}
	return h
}

// held is the look-up answer for p when another process holds a version
// of it or its delete; nil otherwise.
func (f *Federator) held(ctx context.Context, s *snapshot, p string) *entry {
	return f.heldRead(s, p, f.holder(ctx, s, p))
}

// heldRead is the look-up answer h makes for a read of p: nil for none,
// for this process's own, and for a claim (a write being taken, whose
// path reads as before until it is).
func (f *Federator) heldRead(s *snapshot, p string, h *shared.Hold) *entry {
	if h == nil || h.Seq == 0 || h.Owner == f.opts.Self || s.root != nil {
		return nil
	}
	return f.heldEntry(s, p, h)
}

// heldEntry is the answer a hold makes: the holder's version on its
// peer member, not found for a delete, 503 while the holder is not live.
// It is kept for at most a lease: a holder that dies is noticed then.
func (f *Federator) heldEntry(s *snapshot, p string, h *shared.Hold) *entry {
	m := f.peer(s, h.Owner)
	e := &entry{epoch: f.epoch.Load()}
	switch {
	case m == nil:
		e.answers = append(e.answers, answer{m: f.unknownPeer(h.Owner), kind: ansUnavailable,
			err: "holds the newest version, at a URL this federator cannot use"})
		e.incomplete = true
	case h.Deleted:
		e.answers = append(e.answers, answer{m: m, kind: ansNotFound,
			err: "deleted there; its deletion on the endpoints is journaled"})
	case !h.Live:
		e.answers = append(e.answers, answer{m: m, kind: ansDown,
			err: "holds the newest version and is not running (" + h.Node + ")"})
		e.incomplete = true
	default:
		info := endpoint.Info{Name: path.Base(p), Size: h.Size, ETag: h.ETag, Strong: true,
			ModTime: time.Unix(0, h.ModTime), Checksums: h.Sums}
		u, _ := endpoint.RedirectURL(context.Background(), m.ep, p, endpoint.OpRead)
		url, born := "", int64(0)
		if u != nil && !m.proxy {
			url, born = u.String(), time.Now().UnixNano()
		}
		e.replicas = append(e.replicas, newReplica(m, p, info, url, born))
		e.answers = append(e.answers, answer{m: m, kind: ansFound})
	}
	f.finish(s, e, p, false)
	if e.expires > 0 {
		e.expires = min(e.expires, time.Now().Add(f.opts.Shared.Lease()).UnixNano())
	}
	return e
}

// heldWrite is the refusal of a write of p that another process holds
// and that cannot be sent there (its holder is not live), or nil.
func heldWrite(h *shared.Hold, op, p string) error {
	if h.Live {
		return nil
	}
	return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
		"lakefed: %s %s: not done: the write buffer of %s holds the newest version and is not running; "+
			"done elsewhere, it would be undone when that buffer carries its version to the endpoints", op, p, h.Node)
}

// peer returns the member for the process at the URL owner (a hold's
// holder), made on first use: the federator's default kind for the URL,
// redirected to or proxied from as the federation's mode says. Its
// health is not probed or counted: a holder answers while it is a live
// member (shared.Hold.Live). Nil when no endpoint can be made for it.
func (f *Federator) peer(s *snapshot, owner string) *member {
	proxy := s.cfg.Mode == "proxy"
	key := owner
	if proxy {
		key += " proxy"
	}
	f.peersMu.Lock()
	defer f.peersMu.Unlock()
	if m := f.peers[key]; m != nil {
		return m
	}
	name := "buffer@" + owner
	if u, err := url.Parse(owner); err == nil && u.Host != "" {
		name = "buffer@" + u.Host
	}
	ec := config.Endpoint{Config: endpoint.Config{Name: name, URL: owner + "/"}, Writable: true}
	ep, err := kinds.New(f.ctx, ec.Config, f.log)
	if err != nil {
		f.log.Warn("a process holds files at a URL no endpoint can be made for", "url", owner, "err", err)
		return nil
	}
	m := &member{cfg: ec, name: name, ep: ep, url: redactURL(owner), prefix: "/", path: "/", priority: 1,
		writable: true, peer: true, proxy: proxy || !endpoint.CanRedirect(ep)}
	m.h.up.Store(true)
	m.mm = f.m.forMember(name)
	m.mm.up.Set(1)
	if f.peers == nil {
		f.peers = map[string]*member{}
	}
	f.peers[key] = m
	return m
}

// unknownPeer names a holder no member could be made for, in answers.
func (f *Federator) unknownPeer(owner string) *member {
	return &member{name: "buffer@" + owner, prefix: "/", path: "/", peer: true}
}
