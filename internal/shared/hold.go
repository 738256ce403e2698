package shared

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A hold says that one process of the lake answers for a path that the
// endpoints do not have yet: a write buffer took its newest version (or
// its delete) and has not yet carried it to its targets. The others send
// the path's readers and writers to that process (Hold.Owner) until it
// drops the hold, which it does once the targets hold what it held. A
// hold lives in Redis with no expiry: a holder that died still holds
// (its readers get 503, not the older version the targets may have),
// and takes up its holds again when it restarts.
//
// At most one process holds a path. A holder claims the path before it
// takes a write (ClaimHold), so two buffers never take versions of one
// path at once; its versions (Hold.Seq, its own counter) only go up.
//
//	ok, other, err := c.ClaimHold(ctx, p, self)       // before taking a PUT
//	err = c.PutHold(ctx, p, Hold{Owner: self, Seq: 7, Size: n, ETag: tag})
//	h, err := c.LoadHold(ctx, p)                      // a reader elsewhere: nil, or who holds p
//	err = c.DropHold(ctx, p, self, 7)                 // migrated: readers go to the endpoints

// Hold is one process's hold on a path.
type Hold struct {
	// Owner is the holder's URL, where the others send readers and
	// writes of the path (config shared.advertise).
	Owner string `json:"-"`
	// Node is the holder's member name: it answers while it is a live
	// member.
	Node string `json:"-"`
	// Seq is the holder's version of the path; 0 for a claim (a write
	// it is taking, none held yet).
	Seq int64 `json:"-"`
	// Deleted: the holder took a delete of the path, which the targets
	// may not have carried out yet.
	Deleted bool `json:"-"`
	// Size, ETag (strong), ModTime (unix ns) and Sums describe the
	// version held.
	Size    int64             `json:"s"`
	ETag    string            `json:"e"`
	ModTime int64             `json:"m"`
	Sums    map[string]string `json:"c,omitempty"`
	// Live, in a hold LoadHold returns, says whether Node is a live
	// member.
	Live bool `json:"-"`
}

// ErrHeldElsewhere: another process holds the path (PutHold).
var ErrHeldElsewhere = errors.New("shared: another process holds the path")

// ErrNotMember: this process has not joined the membership (ClaimHold).
var ErrNotMember = errors.New("shared: this process is not a member yet")

// claimHold makes ARGV[1] the holder of the path of KEYS[1] unless
// another holds it; it answers "" when ARGV[1] holds it now, else the
// other holder's URL. KEYS[2] is the set of ARGV[1]'s paths.
var claimHold = redis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'owner')
if o and o ~= ARGV[1] then return o end
if not o then
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'node', ARGV[2], 'seq', '0', 'del', '0', 'info', '{}')
  redis.call('SADD', KEYS[2], ARGV[3])
else
  redis.call('HSET', KEYS[1], 'node', ARGV[2])
end
return ''
`)

// putHold records ARGV[1]'s version ARGV[3] of the path unless another
// process holds it (0) or ARGV[1] recorded a newer one (1, unchanged).
var putHold = redis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'owner')
if o and o ~= ARGV[1] then return 0 end
if o and tonumber(redis.call('HGET', KEYS[1], 'seq')) > tonumber(ARGV[3]) then return 1 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'node', ARGV[2], 'seq', ARGV[3], 'del', ARGV[4], 'info', ARGV[5])
redis.call('SADD', KEYS[2], ARGV[6])
return 1
`)

// dropHold removes ARGV[1]'s hold of the path when its version is
// ARGV[2] ("*": any), and the path from ARGV[1]'s set once it holds it
// no more.
var dropHold = redis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'owner')
if o == ARGV[1] and (ARGV[2] == '*' or redis.call('HGET', KEYS[1], 'seq') == ARGV[2]) then
  redis.call('DEL', KEYS[1])
end
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  redis.call('SREM', KEYS[2], ARGV[3])
end
return 1
`)

// loadHold returns the hold of the path as HGETALL does, with "live"
// added: whether its node is a live member, on Redis's clock.
var loadHold = redis.NewScript(`
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return h end
local node = redis.call('HGET', KEYS[1], 'node')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = redis.call('ZSCORE', KEYS[2], node)
local live = '0'
if exp and tonumber(exp) > now then live = '1' end
table.insert(h, 'live')
table.insert(h, live)
return h
`)

// ClaimHold makes owner (a URL) the one process that takes writes of
// p, as this member, unless another holds p: then ok is false and other
// is that holder's URL. A claim is not a version: readers go on reading
// what they read before until PutHold.
//
// Only a member claims: the others take the holds of a process that is
// not one for those of a dead process (503). A process that has not yet
// joined (it just started, or rejoins) is waited for, up to a lease,
// then refused with ErrNotMember.
func (c *Client) ClaimHold(ctx context.Context, p, owner string) (ok bool, other string, err error) {
	if err := c.waitMember(ctx); err != nil {
		return false, "", err
	}
	other, err = claimHold.Run(ctx, c.rdb, []string{Key("hold", p), Key("holds", owner)}, owner, c.node, p).Text()
	if err != nil {
		return false, "", c.unreachable(err)
	}
	return other == "", other, nil
}

// waitMember waits, up to a lease, until this process is a member.
func (c *Client) waitMember(ctx context.Context) error {
	deadline := time.Now().Add(c.opts.Lease)
	for {
		if c.degraded.Load() {
			return ErrDegraded
		}
		if v := c.validUntil.Load(); v != nil && time.Now().Before(*v) {
			return nil
		}
		if time.Now().After(deadline) {
			return ErrNotMember
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PutHold records h (h.Owner's version h.Seq of p, as this member).
// ErrHeldElsewhere when another process holds p; a version older than
// the one recorded changes nothing.
func (c *Client) PutHold(ctx context.Context, p string, h Hold) error {
	if c.degraded.Load() {
		return ErrDegraded
	}
	info, err := json.Marshal(h)
	if err != nil {
		return err
	}
	del := "0"
	if h.Deleted {
		del = "1"
	}
	n, err := putHold.Run(ctx, c.rdb, []string{Key("hold", p), Key("holds", h.Owner)},
		h.Owner, c.node, h.Seq, del, info, p).Int()
	if err != nil {
		return c.unreachable(err)
	}
	if n == 0 {
		return ErrHeldElsewhere
	}
	return nil
}

// DropHold ends owner's hold of p if its version is seq (a claim: 0;
// any: -1). Another's hold, or a newer version, is left alone.
func (c *Client) DropHold(ctx context.Context, p, owner string, seq int64) error {
	if c.degraded.Load() {
		return ErrDegraded
	}
	v := "*"
	if seq >= 0 {
		v = strconv.FormatInt(seq, 10)
	}
	if err := dropHold.Run(ctx, c.rdb, []string{Key("hold", p), Key("holds", owner)}, owner, v, p).Err(); err != nil {
		return c.unreachable(err)
	}
	return nil
}

// LoadHold returns the hold of p, with whether its holder is a live
// member, or nil when no process holds p.
func (c *Client) LoadHold(ctx context.Context, p string) (*Hold, error) {
	if c.degraded.Load() {
		return nil, ErrDegraded
	}
	r := loadHold.Run(ctx, c.rdb, []string{Key("hold", p), Key("members")})
	if err := r.Err(); err != nil {
		return nil, c.unreachable(err)
	}
	return parseHold(r)
}

// parseHold reads loadHold's answer: nil when no process holds the path.
func parseHold(r *redis.Cmd) (*Hold, error) {
	kv, err := r.StringSlice()
	if err != nil || len(kv) == 0 {
		return nil, err
	}
	f := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		f[kv[i]] = kv[i+1]
	}
	h := &Hold{}
	if err := json.Unmarshal([]byte(f["info"]), h); err != nil {
		return nil, err
	}
	h.Owner, h.Node, h.Deleted, h.Live = f["owner"], f["node"], f["del"] == "1", f["live"] == "1"
	h.Seq, _ = strconv.ParseInt(f["seq"], 10, 64)
	return h, nil
}

// HeldBy lists the paths owner holds or has claimed.
func (c *Client) HeldBy(ctx context.Context, owner string) ([]string, error) {
	if c.degraded.Load() {
		return nil, ErrDegraded
	}
	ps, err := c.rdb.SMembers(ctx, Key("holds", owner)).Result()
	if err != nil {
		return nil, c.unreachable(err)
	}
	return ps, nil
}
