package davlock

import (
	"container/heap"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/webdav"
)

// table is the storage role's table of WebDAV write locks (RFC 4918
// §6, §7). It keeps every lock with its scope: several shared locks may
// cover a resource at once, an exclusive lock conflicts with any other,
// and a depth-infinity lock on a collection covers all its members. Our
// LOCK and UNLOCK handlers use it through create, refresh and unlock; every
// method that changes a resource asks admit (through Locks.Guard)
// before it starts. x/net/webdav never sees it: its own check matches an
// If header's tagged list against the resource the list names, not the
// target, which let a token for one file open another (see Pass).
//
// Locks are indexed by path in a tree of path segments, so finding what
// covers a path walks that path's parents, and nothing scans the table:
// the cost of a LOCK or a check does not grow with the number of locks
// held elsewhere. A heap orders locks by expiry; each call first drops the
// expired ones at its top, so an abandoned lock goes without a janitor.
//
// One client must not be able to stop the server's writes (a table full of
// never-expiring locks once turned every PUT into a 500), so every lock
// expires within MaxTimeout, at most MaxLocksPerResource locks cover
// any one resource and at most MaxLocksTotal exist; past a cap, LOCK is
// refused with errTooManyLocks (503), never anything else.
type table struct {
	mu      sync.Mutex          // guards the fields below but held
	byToken map[string]*davLock // every live lock by token
	root    *lockNode           // the tree of lock roots and guards, "/" at the top
	expiry  lockHeap            // every live lock, earliest expiry first
	visited int                 // lock entries examined; tests read it to show nothing scans the table

	// held counts the locks in byToken, so the write paths can skip lock
	// checks entirely while nobody holds a lock.
	held atomic.Int64
}

// davLock is one WebDAV write lock.
type davLock struct {
	token   string
	details webdav.LockDetails // Root is clean; 0 < Duration <= MaxTimeout
	shared  bool
	expiry  time.Time
	holds   int // requests currently relying on the lock (admit)
	index   int // in table.expiry
}

// lockNode is one path segment in the lock tree. A node stays while a
// lock or a guard lives at or below it.
type lockNode struct {
	parent   *lockNode
	name     string
	children map[string]*lockNode
	locks    []*davLock // locks rooted here
	deep     int        // of locks, how many have depth infinity
	guards   int        // requests changing this resource right now
	deepGrd  int        // of guards, how many change all members too
	sub      int        // locks rooted at or below this node
	subExcl  int        // of sub, how many are exclusive
	subGrd   int        // guards at or below this node
}

// Caps on the lock table. RFC 4918 §10.7 lets the server choose a lock's
// timeout whatever the client asks; §6.4 lets it refuse a lock.
const (
	// MaxTimeout is the longest a lock lives without a refresh; a
	// Timeout of Infinite, none, or more seconds gets this.
	MaxTimeout = time.Hour
	// MaxLocksPerResource bounds the locks covering any one resource
	// (its own plus depth-infinity locks on its parents), and so the
	// lockdiscovery a PROPFIND returns for it.
	MaxLocksPerResource = 64
	// MaxLocksTotal bounds the whole table (about 1 KiB a lock with a
	// short owner, see maxLockOwner).
	MaxLocksTotal = 10000
	// maxRefusedHrefs bounds the hrefs named in one 423 answer.
	maxRefusedHrefs = 64
)

// errTooManyLocks refuses a lock while a cap is reached; see lockCapError.
var errTooManyLocks = errors.New("davlock: too many locks")

// lockCapError is errTooManyLocks with the time until the first lock in
// the way expires, for Retry-After.
type lockCapError struct{ retry time.Duration }

func (e *lockCapError) Error() string { return errTooManyLocks.Error() }
func (e *lockCapError) Unwrap() error { return errTooManyLocks }

func newTable() *table {
	return &table{byToken: make(map[string]*davLock), root: &lockNode{}}
}

// lockClean cleans a WebDAV name the way x/net/webdav does.
func lockClean(name string) string {
	if name == "" || name[0] != '/' {
		name = "/" + name
	}
	return path.Clean(name)
}

// segments splits a clean path into its names ("/" has none).
func segments(name string) []string {
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// covers reports whether lock l applies to the clean path name.
func (l *davLock) covers(name string) bool {
	root := l.details.Root
	if name == root {
		return true
	}
	return !l.details.ZeroDepth && (root == "/" || strings.HasPrefix(name, root+"/"))
}

// nodeLocked returns the node of the clean path name, or nil when none
// exists and !create. Callers hold ls.mu.
func (ls *table) nodeLocked(name string, create bool) *lockNode {
	n := ls.root
	for _, seg := range segments(name) {
		c := n.children[seg]
		if c == nil {
			if !create {
				return nil
			}
			if n.children == nil {
				n.children = make(map[string]*lockNode)
			}
			c = &lockNode{parent: n, name: seg}
			n.children[seg] = c
		}
		n = c
	}
	return n
}

// ancestorsLocked calls fn for every existing node strictly above the
// clean path name, from the top, and returns the node of name (nil when
// there is none). Callers hold ls.mu.
func (ls *table) ancestorsLocked(name string, fn func(*lockNode)) *lockNode {
	n := ls.root
	for _, seg := range segments(name) {
		fn(n)
		if n = n.children[seg]; n == nil {
			return nil
		}
	}
	return n
}

// addUp adds d locks (of which excl exclusive) and g guards to n and
// every node above it, and drops nodes that hold nothing any more.
// Callers hold ls.mu.
func addUp(n *lockNode, d, excl, g int) {
	for ; n != nil; n = n.parent {
		n.sub += d
		n.subExcl += excl
		n.subGrd += g
		if n.sub == 0 && n.subGrd == 0 && n.parent != nil {
			delete(n.parent.children, n.name)
		}
	}
}

// expireLocked drops the locks whose time is up. Callers hold ls.mu.
func (ls *table) expireLocked(now time.Time) {
	for len(ls.expiry) > 0 && !now.Before(ls.expiry[0].expiry) {
		ls.removeLocked(ls.expiry[0])
	}
}

// removeLocked takes lock l out of the table. Callers hold ls.mu.
func (ls *table) removeLocked(l *davLock) {
	delete(ls.byToken, l.token)
	heap.Remove(&ls.expiry, l.index)
	ls.held.Store(int64(len(ls.byToken)))
	n := ls.nodeLocked(l.details.Root, false)
	if n == nil {
		return
	}
	for i, o := range n.locks {
		if o == l {
			n.locks = append(n.locks[:i], n.locks[i+1:]...)
			break
		}
	}
	if !l.details.ZeroDepth {
		n.deep--
	}
	excl := 0
	if !l.shared {
		excl = 1
	}
	addUp(n, -1, -excl, 0)
}

// clampTimeout applies MaxTimeout: RFC 4918 §10.7 leaves the timeout
// to the server, and a lock that never expires is a lock a vanished
// client never gives back.
func clampTimeout(d time.Duration) time.Duration {
	if d <= 0 || d > MaxTimeout {
		return MaxTimeout
	}
	return d
}

// create adds a lock unless it conflicts (webdav.ErrLocked) or a cap is
// reached (errTooManyLocks): two locks conflict when one covers the
// other's root and not both are shared; a lock also conflicts with a
// request changing a resource it would cover (guards). Only the new
// root's parents, the locks on the root itself and counters are looked
// at, never the whole table.
func (ls *table) create(now time.Time, details webdav.LockDetails, shared bool) (davLock, error) {
	details.Root = lockClean(details.Root)
	details.Duration = clampTimeout(details.Duration)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	conflict, covering := false, 0
	var first time.Time // earliest expiry among the locks counted
	count := func(l *davLock) {
		ls.visited++
		covering++
		conflict = conflict || !(shared && l.shared)
		if first.IsZero() || l.expiry.Before(first) {
			first = l.expiry
		}
	}
	t := ls.ancestorsLocked(details.Root, func(n *lockNode) {
		conflict = conflict || n.deepGrd > 0
		for _, l := range n.locks {
			if !l.details.ZeroDepth {
				count(l)
			}
		}
	})
	below := 0
	if t != nil {
		for _, l := range t.locks {
			count(l)
		}
		conflict = conflict || t.guards > 0
		if !details.ZeroDepth {
			below = t.sub - len(t.locks)
			exclHere := 0
			for _, l := range t.locks {
				if !l.shared {
					exclHere++
				}
			}
			conflict = conflict || t.subGrd > t.guards || (below > 0 && (!shared || t.subExcl > exclHere))
		}
	}
	if conflict {
		return davLock{}, webdav.ErrLocked
	}
	// A depth-infinity lock also covers every lock below it; counting them
	// all (even on other branches) keeps the cap exact for each member.
	if covering+below >= MaxLocksPerResource {
		return davLock{}, &lockCapError{retry: first.Sub(now)}
	}
	if len(ls.byToken) >= MaxLocksTotal {
		return davLock{}, &lockCapError{retry: ls.expiry[0].expiry.Sub(now)}
	}
	tok, err := newLockToken()
	if err != nil {
		return davLock{}, err
	}
	nl := &davLock{token: tok, details: details, shared: shared, expiry: now.Add(details.Duration)}
	ls.insertLocked(nl)
	return *nl, nil
}

// insertLocked adds lock l to the table. Callers hold ls.mu.
func (ls *table) insertLocked(l *davLock) {
	n := ls.nodeLocked(l.details.Root, true)
	n.locks = append(n.locks, l)
	if !l.details.ZeroDepth {
		n.deep++
	}
	excl := 0
	if !l.shared {
		excl = 1
	}
	addUp(n, 1, excl, 0)
	ls.byToken[l.token] = l
	heap.Push(&ls.expiry, l)
	ls.held.Store(int64(len(ls.byToken)))
}

// newLockToken returns a fresh opaquelocktoken URI (RFC 4918 appendix C)
// with a random (version 4) UUID.
func newLockToken() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("storage: lock token: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("opaquelocktoken:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// refresh restarts the timeout of the lock token, which must cover the
// clean path name (RFC 4918 §9.10.2).
func (ls *table) refresh(now time.Time, token, name string, duration time.Duration) (davLock, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	l := ls.byToken[token]
	if l == nil || !l.covers(lockClean(name)) {
		return davLock{}, webdav.ErrNoSuchLock
	}
	l.details.Duration = clampTimeout(duration)
	l.expiry = now.Add(l.details.Duration)
	heap.Fix(&ls.expiry, l.index)
	return *l, nil
}

// unlock removes the lock token, which must cover the clean path name
// (RFC 4918 §9.11). A lock a request is relying on right now cannot go
// (webdav.ErrLocked).
func (ls *table) unlock(now time.Time, token, name string) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	l := ls.byToken[token]
	if l == nil || !l.covers(lockClean(name)) {
		return webdav.ErrNoSuchLock
	}
	if l.holds > 0 {
		return webdav.ErrLocked
	}
	ls.removeLocked(l)
	return nil
}

// locksOn returns the locks that cover the clean path name, for the
// lockdiscovery property: at most MaxLocksPerResource.
func (ls *table) locksOn(now time.Time, name string) []davLock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	var out []davLock
	add := func(l *davLock, self bool) {
		ls.visited++
		if self || !l.details.ZeroDepth {
			out = append(out, *l)
		}
	}
	t := ls.ancestorsLocked(name, func(n *lockNode) {
		if n.deep > 0 {
			for _, l := range n.locks {
				add(l, false)
			}
		}
	})
	if t != nil {
		for _, l := range t.locks {
			add(l, true)
		}
	}
	return out
}

// covering reports whether the lock token is live and covers the clean
// path name: the state token of an If header condition matches
// (RFC 4918 §10.4.4).
func (ls *table) covering(now time.Time, token, name string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	l := ls.byToken[token]
	return l != nil && l.covers(name)
}

// count returns the number of live locks.
func (ls *table) count() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.byToken)
}

// Target is a resource a request changes: PUT, MKCOL and PROPPATCH
// change one, DELETE and the two ends of a MOVE (and the destination of
// a COPY) change every member too.
type Target struct {
	Path string // clean
	Deep bool   // members too
}

// admit lets a request change the targets when, for each resource they
// take in (for a deep target, every member too), the token of one of the
// locks covering that resource was submitted: one suffices when several
// shared locks cover it (RFC 4918 §6.2, §7). It then holds the submitted
// locks (UNLOCK answers 423 until release) and guards the targets (a
// conflicting LOCK answers 423 until release), and returns release.
// Otherwise it returns the roots of the locks in the way, at most
// maxRefusedHrefs. Only nodes with locks are visited: the target's parents
// and, for a deep target, the locked nodes below it.
func (ls *table) admit(now time.Time, targets []Target, submitted func(*davLock) bool) (release func(), refused []string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.expireLocked(now)
	var hold []*davLock
	// point checks one resource, covered by the locks in sets.
	point := func(sets ...[]*davLock) {
		ok, any := false, false
		for _, set := range sets {
			for _, l := range set {
				ls.visited++
				any = true
				if submitted(l) {
					ok = true
					hold = append(hold, l)
				}
			}
		}
		if ok || !any {
			return
		}
		for _, set := range sets {
			for _, l := range set {
				if len(refused) < maxRefusedHrefs && !slices.Contains(refused, l.details.Root) {
					refused = append(refused, l.details.Root)
				}
			}
		}
	}
	for _, tg := range targets {
		var inherited []*davLock // depth-infinity locks above
		t := ls.ancestorsLocked(tg.Path, func(n *lockNode) { inherited = deepLocks(inherited, n) })
		switch {
		case t == nil:
			point(inherited)
		case !tg.Deep:
			point(inherited, t.locks)
		default:
			ls.admitBelowLocked(t, inherited, point)
		}
	}
	if len(refused) > 0 {
		return nil, refused
	}
	for _, l := range hold {
		l.holds++
	}
	nodes := make([]*lockNode, len(targets))
	for i, tg := range targets {
		nodes[i] = ls.guardLocked(tg)
	}
	return func() {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for _, l := range hold {
			l.holds--
		}
		for i, tg := range targets {
			ls.unguardLocked(nodes[i], tg)
		}
	}, nil
}

// admitBelowLocked calls point for node n, for its members when it has a
// depth-infinity lock, and so on for every locked node below it;
// inherited are the depth-infinity locks above n. Callers hold ls.mu.
func (ls *table) admitBelowLocked(n *lockNode, inherited []*davLock, point func(...[]*davLock)) {
	if n.sub == 0 {
		point(inherited)
		return
	}
	point(inherited, n.locks)
	if n.deep > 0 {
		inherited = deepLocks(slices.Clip(inherited), n)
		point(inherited)
	}
	for _, c := range n.children {
		if c.sub > 0 {
			ls.admitBelowLocked(c, slices.Clip(inherited), point)
		}
	}
}

// deepLocks appends the depth-infinity locks rooted at n to ls.
func deepLocks(ls []*davLock, n *lockNode) []*davLock {
	if n.deep == 0 {
		return ls
	}
	for _, l := range n.locks {
		if !l.details.ZeroDepth {
			ls = append(ls, l)
		}
	}
	return ls
}

// walkSubtree calls fn for n and every node below it that holds a lock.
func walkSubtree(n *lockNode, fn func(*lockNode)) {
	if n.sub == 0 {
		return
	}
	fn(n)
	for _, c := range n.children {
		walkSubtree(c, fn)
	}
}

// guardLocked marks target as being changed and returns its node.
// Callers hold ls.mu.
func (ls *table) guardLocked(tg Target) *lockNode {
	n := ls.nodeLocked(tg.Path, true)
	n.guards++
	if tg.Deep {
		n.deepGrd++
	}
	addUp(n, 0, 0, 1)
	return n
}

// unguardLocked undoes guardLocked on node n. Callers hold ls.mu.
func (ls *table) unguardLocked(n *lockNode, tg Target) {
	n.guards--
	if tg.Deep {
		n.deepGrd--
	}
	addUp(n, 0, 0, -1)
}

// locksBelow returns the locks rooted at or below the clean path name.
func (ls *table) locksBelow(name string) []*davLock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []*davLock
	if t := ls.nodeLocked(name, false); t != nil {
		walkSubtree(t, func(n *lockNode) { out = append(out, n.locks...) })
	}
	return out
}

// drop removes the given locks unless they are gone already. A lock
// belongs to a URL (RFC 4918 §7): when a DELETE or MOVE removes the
// resource, its lock goes too, rather than blocking the old URL until it
// expires.
func (ls *table) drop(locks []*davLock) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range locks {
		if ls.byToken[l.token] == l {
			ls.removeLocked(l)
		}
	}
}

// lockHeap orders locks by expiry (container/heap).
type lockHeap []*davLock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].expiry.Before(h[j].expiry) }
func (h lockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *lockHeap) Push(x any) {
	l := x.(*davLock)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *lockHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return l
}

// Pass is the webdav.LockSystem to hand to x/net/webdav. Every lock
// check is done by Locks.Guard before a request reaches that handler, so
// this one confirms everything: x/net/webdav's own confirmLocks evaluates
// a tagged If list against the resource the list names, not the target
// (RFC 4918 §10.4), and would let a token for /X.txt open /V.txt.
type Pass struct{}

var _ webdav.LockSystem = Pass{}

// Confirm confirms: Locks.Guard has checked the request.
func (Pass) Confirm(time.Time, string, string, ...webdav.Condition) (func(), error) {
	return func() {}, nil
}

// Create is called for x/net/webdav's per-request locks; none is needed.
func (Pass) Create(time.Time, webdav.LockDetails) (string, error) { return "", nil }

// Refresh is never reached: LOCK is answered by Locks.ServeLock.
func (Pass) Refresh(time.Time, string, time.Duration) (webdav.LockDetails, error) {
	return webdav.LockDetails{}, webdav.ErrNoSuchLock
}

// Unlock is never reached: UNLOCK is answered by Locks.ServeUnlock.
func (Pass) Unlock(time.Time, string) error { return webdav.ErrNoSuchLock }
