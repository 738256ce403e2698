package shared

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// versionTTL is how long a path's version outlives its last write. A
// look-up holds a version only while it asks the endpoints (bounded by
// their timeouts, seconds), so a version forgotten after ten minutes
// cannot let an old answer through; without a TTL, every path ever
// written would keep a key.
const versionTTL = 10 * time.Minute

// Meta is a second-level metadata entry as LoadMeta found it.
type Meta struct {
	// Value is the entry as the role encoded it; nil when there is none.
	Value []byte
	// Version is the path's write count when it was read, and the run
	// of the Redis server it was read on, for StoreMeta.
	Version string
	// Hold is the path's hold (hold.go), read with the entry: nil when
	// no process holds it.
	Hold *Hold
}

// LoadMeta returns p's second-level entry (Value nil when there is none)
// and the path's version, which a look-up that goes on to ask the
// endpoints hands to StoreMeta, and its hold, in one round trip.
func (c *Client) LoadMeta(ctx context.Context, p string) (Meta, error) {
	if c.degraded.Load() {
		return Meta{}, ErrDegraded
	}
	m, err := c.loadMeta(ctx, p)
	if errors.Is(err, errNoScript) {
		// The server has not seen the hold script yet (it restarted, or
		// nobody asked before): load it, and ask again, once.
		if err := loadHold.Load(ctx, c.rdb).Err(); err != nil {
			return Meta{}, c.unreachable(err)
		}
		m, err = c.loadMeta(ctx, p)
	}
	return m, err
}

// errNoScript: the server does not have a script asked by its hash.
var errNoScript = errors.New("shared: script not loaded")

func (c *Client) loadMeta(ctx context.Context, p string) (Meta, error) {
	pipe := c.rdb.Pipeline()
	val := pipe.Get(ctx, Key("md", p))
	ver := pipe.Get(ctx, Key("ver", p))
	// By its hash: sending the script itself (EVAL) costs more than a
	// round trip of its own (the server hashes it every time).
	hold := loadHold.EvalSha(ctx, pipe, []string{Key("hold", p), Key("members")})
	_, err := pipe.Exec(ctx)
	if redis.HasErrorPrefix(hold.Err(), "NOSCRIPT") {
		return Meta{}, errNoScript
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		return Meta{}, c.unreachable(err)
	}
	h, err := parseHold(hold)
	if err != nil {
		return Meta{}, err
	}
	id := c.server()
	count := "0"
	if v, err := ver.Result(); err == nil {
		count = v
	}
	m := Meta{Version: id + " " + count, Hold: h}
	if b, err := val.Bytes(); err == nil {
		m.Value = unwrap(id, b)
	}
	return m, nil
}

// storeIf stores an entry only while the path's version is the one the
// look-up started with and, when a third key is given, while its
// directory's version is the one read before the listing it was
// answered from.
var storeIf = redis.NewScript(`
local v = redis.call('GET', KEYS[2]) or '0'
if v ~= ARGV[1] then return 0 end
if KEYS[3] and (redis.call('GET', KEYS[3]) or '0') ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// StoreMeta stores value as p's second-level entry for ttl, unless p was
// written since its version was read (LoadMeta): such an answer may
// predate the write. It reports whether the entry was stored.
func (c *Client) StoreMeta(ctx context.Context, p string, version string, value []byte, ttl time.Duration) (bool, error) {
	return c.storeMeta(ctx, p, version, "", value, ttl)
}

// StoreMetaListed is StoreMeta for an answer taken from a listing of
// p's directory, asked for after that directory's version was read
// (DirVersion): it is refused too when any path of the directory was
// written since, as the listing may predate that write.
func (c *Client) StoreMetaListed(ctx context.Context, p, version, dirVersion string, value []byte, ttl time.Duration) (bool, error) {
	if dirVersion == "" {
		return false, nil
	}
	return c.storeMeta(ctx, p, version, dirVersion, value, ttl)
}

func (c *Client) storeMeta(ctx context.Context, p, version, dirVersion string, value []byte, ttl time.Duration) (bool, error) {
	if c.degraded.Load() {
		return false, ErrDegraded
	}
	// The entry carries the run_id of the server its version was read
	// on: a restart in between makes readers refuse it (unwrap).
	id, count, _ := strings.Cut(version, " ")
	keys := []string{Key("md", p), Key("ver", p)}
	args := []any{count, wrap(id, value), max(1, ttl.Milliseconds())}
	if dirVersion != "" {
		did, dcount, _ := strings.Cut(dirVersion, " ")
		if did != id {
			return false, nil // read on another run of the server: its count says nothing now
		}
		keys = append(keys, Key("dver", path.Dir(p)))
		args = append(args, dcount)
	}
	n, err := storeIf.Run(ctx, c.rdb, keys, args...).Int64()
	if err != nil {
		return false, c.unreachable(err)
	}
	return n == 1, nil
}

// DirVersion returns the version of the directory dir: how many writes
// of paths directly in it Invalidate has counted (while they are
// recent: versionTTL), with the server's run, for StoreMetaListed.
func (c *Client) DirVersion(ctx context.Context, dir string) (string, error) {
	if c.degraded.Load() {
		return "", ErrDegraded
	}
	v, err := c.rdb.Get(ctx, Key("dver", dir)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		v = "0"
	case err != nil:
		return "", c.unreachable(err)
	}
	id := c.server()
	if id == "" {
		return "", ErrDegraded
	}
	return id + " " + v, nil
}

// wrap prefixes an entry with the run_id of the Redis server whose
// version of the path it answers. A Redis restarted from a snapshot
// (RDB or AOF persistence) brings back the entries and versions of paths
// written after the snapshot was taken, whose writes it lost; it also
// has a new run_id, so unwrap refuses them all, and only entries of
// versions read since the restart are handed out.
func wrap(id string, value []byte) []byte {
	b := make([]byte, 0, len(id)+1+len(value))
	return append(append(append(b, id...), ' '), value...)
}

// unwrap returns the entry wrap made for the server run id, or nil for
// one made on another run of it.
func unwrap(id string, b []byte) []byte {
	got, v, ok := bytes.Cut(b, []byte{' '})
	if !ok || id == "" || string(got) != id {
		return nil
	}
	return v
}

// TryLease takes the lease name for ttl if nobody holds it, and reports
// whether it did: one process of many does the work (asks the endpoints
// for a path, probes an endpoint this interval). A lease is never
// released early: it only ends, so a holder that stalls cannot have its
// work done twice at once.
func (c *Client) TryLease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	if c.degraded.Load() {
		return false, ErrDegraded
	}
	ok, err := c.rdb.SetNX(ctx, Key("lease", name), c.node, ttl).Result()
	if err != nil {
		return false, c.unreachable(err)
	}
	return ok, nil
}

// Put stores value under the role's key name for ttl (a probe's result,
// a member's heartbeat): what the others read with Get.
func (c *Client) Put(ctx context.Context, name string, value []byte, ttl time.Duration) error {
	if c.degraded.Load() {
		return ErrDegraded
	}
	if err := c.rdb.Set(ctx, Key("state", name), value, ttl).Err(); err != nil {
		return c.unreachable(err)
	}
	return nil
}

// Get returns the value Put stored under name, nil when there is none
// (never stored, or expired).
func (c *Client) Get(ctx context.Context, name string) ([]byte, error) {
	if c.degraded.Load() {
		return nil, ErrDegraded
	}
	b, err := c.rdb.Get(ctx, Key("state", name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, c.unreachable(err)
	}
	return b, nil
}

// Drop deletes what Put stored under name (an exclusion lifted).
func (c *Client) Drop(ctx context.Context, name string) error {
	if c.degraded.Load() {
		return ErrDegraded
	}
	if err := c.rdb.Del(ctx, Key("state", name)).Err(); err != nil {
		return c.unreachable(err)
	}
	return nil
}

// Push adds value at the head of the list name, which keeps the newest
// keep values (a record every process appends to: replica
// disagreements). The list lives until deleted: it is the shared memory
// of the lake, kept across restarts of every process.
func (c *Client) Push(ctx context.Context, name string, value []byte, keep int) error {
	if c.degraded.Load() {
		return ErrDegraded
	}
	pipe := c.rdb.TxPipeline()
	pipe.LPush(ctx, Key("list", name), value)
	pipe.LTrim(ctx, Key("list", name), 0, int64(keep-1))
	if _, err := pipe.Exec(ctx); err != nil {
		return c.unreachable(err)
	}
	return nil
}

// List returns the values of the list name, newest first.
func (c *Client) List(ctx context.Context, name string) ([][]byte, error) {
	if c.degraded.Load() {
		return nil, ErrDegraded
	}
	vals, err := c.rdb.LRange(ctx, Key("list", name), 0, -1).Result()
	if err != nil {
		return nil, c.unreachable(err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Group is a membership of the processes of one kind (the nodes of a
// cache group): each registers itself with a heartbeat, on Redis's
// clock, and the group is the registrations that have not run out.
type Group struct {
	c    *Client
	name string
}

// Group returns the group name.
func (c *Client) Group(name string) *Group { return &Group{c: c, name: name} }

// Heartbeat registers member for ttl more.
func (g *Group) Heartbeat(ctx context.Context, member string, ttl time.Duration) error {
	if _, err := heartbeat.Run(ctx, g.c.rdb, []string{Key("group", g.name)}, member, ttl.Milliseconds(), "0").Int64(); err != nil {
		return g.c.unreachable(err)
	}
	return nil
}

// Members lists the registrations that have not run out.
func (g *Group) Members(ctx context.Context) ([]string, error) {
	m, err := liveMembers.Run(ctx, g.c.rdb, []string{Key("group", g.name)}).StringSlice()
	if err != nil {
		return nil, g.c.unreachable(err)
	}
	return m, nil
}
