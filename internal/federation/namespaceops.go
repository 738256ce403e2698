package federation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// The namespace operations beyond PUT, DELETE and MKCOL (write.go): a
// move, the removal of an empty directory, a truncate and a chmod, as
// Go functions the root:// door and the HTTP front (MOVE) adapt. They
// keep the rules of a write through the federator:
//
//   - They look afresh (not from the cache), and when an endpoint that
//     could hold the path does not answer, nothing is done and the
//     answer is 503: it may hold a copy the operation would miss.
//   - They never leave a half-done change. A rename, a truncate and a
//     chmod are each one step on one endpoint; a file held on several
//     endpoints cannot be renamed or truncated in one step (one endpoint
//     may fail after another succeeded, and an undo may fail too), so
//     such a request is refused with a message that says so, before
//     anything changes. A move goes where the placement rule would put
//     the destination; one that would need another endpoint is a copy
//     and a delete, not a rename, and is refused the same way.
//   - A kind that cannot do an operation in one step (S3 has no rename)
//     gets a refusal naming the kind (endpoint.ErrUnsupported).
//   - Every path they change, whatever the outcome, leaves the metadata
//     cache and goes to Options.OnWrite before the answer (wrote): for a
//     moved directory, every path below it under both names.

// kind names m's endpoint kind ("s3", "xroot"...), for messages.
func (m *member) kind() string {
	if _, k, err := endpoint.Resolve(m.cfg.Config); err == nil {
		return k
	}
	return "unknown"
}

// maxMovedPaths bounds the walk of a moved directory whose paths are
// told to the caches (wrote): a tree larger than this is moved, but only
// its first paths are dropped from the caches, and a warning says so.
const maxMovedPaths = 100_000

// Move renames from to to. from must be held by one endpoint, writable
// in the federation and of a kind that can rename (endpoint.Renamer),
// and to must belong there too (the endpoint's prefix and the placement
// rule of a new file, or where to already lives); a file at to is
// replaced, a directory at to is refused. WriteOptions.Cond is evaluated
// against to (If-None-Match: * is WebDAV's Overwrite: F). created says
// to did not exist.
func (f *Federator) Move(ctx context.Context, from, to string, o WriteOptions) (created bool, err error) {
	return f.move(ctx, f.snap.Load(), from, to, o)
}

func (f *Federator) move(ctx context.Context, s *snapshot, from, to string, o WriteOptions) (created bool, err error) {
	if err := f.sharedWritable(from); err != nil {
		return false, err
	}
	var below []string // paths below a moved directory, relative to it
	defer func() {
		changed := []string{from, to}
		for _, rel := range below {
			changed = append(changed, from+rel, to+rel)
		}
		for _, p := range changed {
			f.wrote(ctx, s, p, 0, false)
		}
		// The federators sharing state are told once, of every path.
		if werr := f.sharedWrote(ctx, changed...); err == nil {
			err = werr
		}
	}()
	refuse := func(code int, class error, format string, args ...any) (bool, error) {
		msg := fmt.Sprintf(format, args...)
		return false, writeErr(code, class, "lakefed: mv %s %s: %s; nothing was moved", from, to, msg)
	}
	switch {
	case from == "/" || to == "/":
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "the root cannot be moved or replaced")
	case strings.HasPrefix(to, from+"/"):
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "the destination is inside the source")
	}
	for _, q := range []string{from, to} {
		if h := f.holder(ctx, s, q); h != nil {
			return refuse(http.StatusForbidden, endpoint.ErrRefused,
				"the write buffer of %s holds %s, which may not have reached its endpoints yet; a move there is not supported", h.Node, q)
		}
	}
	src := f.locateEndpoints(ctx, s, from, o.Hops, false)
	if src.status != http.StatusOK {
		code, msg := missingReport(from, src)
		return false, writeErr(code, endpoint.ClassOfStatus(code), "%s", msg)
	}
	switch {
	case len(src.replicas) == 0:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "%s is a directory of the federation itself (a parent of an endpoint's prefix)", from)
	case src.incomplete:
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"%s could not be asked, and may hold a copy that would stay under the old name", strings.Join(unanswered(src, true), ", "))
	case len(src.replicas) > 1:
		return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
			"%s is held by %s: a rename on several endpoints cannot be made all-or-nothing (one may fail after another succeeded, and so may the undo); remove the other copies first",
			from, strings.Join(replicaNames(src.replicas), ", "))
	}
	if from == to {
		return false, nil // as rename(2): nothing to do
	}
	rep := src.replicas[0]
	m := rep.m
	switch _, canRename := m.ep.(endpoint.Renamer); {
	case !m.writable:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "%s is on %s, read-only in this federation", from, m.name)
	case !m.matches(to):
		return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
			"%s is on %s, which holds only %s: a move to another endpoint is a copy and a delete, not a rename", from, m.name, m.prefix)
	case !canRename:
		return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
			"%s is on %s, of kind %s, which cannot rename in one step", from, m.name, m.kind())
	}
	dst := f.locateEndpoints(ctx, s, to, o.Hops, false)
	if dst.status == http.StatusServiceUnavailable || dst.incomplete {
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"%s could not be asked, and may hold a version of the destination", strings.Join(unanswered(dst, true), ", "))
	}
	if code, msg := putPreconditions(o.Cond, dst); code != 0 {
		return refuse(code, endpoint.ClassOfStatus(code), "%s", msg)
	}
	exists := dst.status == http.StatusOK
	switch {
	case exists && dst.isDir:
		return refuse(http.StatusConflict, endpoint.ErrExist, "%s is a directory", to)
	case exists && src.isDir:
		return refuse(http.StatusConflict, endpoint.ErrExist, "%s exists, and a directory cannot replace a file", to)
	case exists:
		for _, r := range dst.replicas {
			if r.m != m {
				return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
					"%s is held by %s too, which a rename on %s cannot replace in the same step; remove it first", to, r.m.name, m.name)
			}
		}
	default:
		// A new name belongs under the most specific prefix that holds
		// it, as a new file does (placeBefore); among the endpoints of
		// that prefix, priority (or spread) only chooses where new files
		// go, and a renamed one may stay where it is.
		cands, _ := writable(s, to, o.Hops)
		if len(cands) > 0 && (len(m.prefix) != len(cands[0].prefix) || m.upstream != cands[0].upstream) {
			return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
				"a new %s belongs on %s (the most specific prefix, %s), not on %s where %s is: a move across endpoints is a copy and a delete, not a rename",
				to, cands[0].name, cands[0].prefix, m.name, from)
		}
	}
	if !m.h.Up() {
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "%s is down", m.name)
	}
	if o.Hops > 0 {
		ctx = httpx.WithHops(ctx, o.Hops)
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
	start := time.Now()
	err = endpoint.Rename(rctx, m.ep, rep.path, m.endpointPath(to))
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			f.requestResult(s, m, err, 0)
		}
		return false, writeErr(endpoint.HTTPStatus(err), err, "lakefed: mv %s %s on %s", from, to, m.name)
	}
	f.requestResult(s, m, nil, time.Since(start))
	if src.isDir {
		below = f.walk(ctx, m, m.endpointPath(to))
	}
	return !exists, nil
}

// replicaNames lists the endpoints of replicas.
func replicaNames(reps []*replica) []string {
	names := make([]string, len(reps))
	for i, r := range reps {
		names[i] = r.m.name
	}
	return names
}

// walk lists the tree below the directory dir of m, and returns its
// paths relative to dir ("/a", "/a/b"), at most maxMovedPaths of them.
// A listing that fails leaves that part out, with a warning: the walk
// only tells caches what changed.
func (f *Federator) walk(ctx context.Context, m *member, dir string) []string {
	var out []string
	queue := []string{""}
	for len(queue) > 0 && len(out) < maxMovedPaths {
		rel := queue[0]
		queue = queue[1:]
		lctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
		items, err := m.ep.List(lctx, dir+rel)
		cancel()
		if err != nil {
			f.log.WarnContext(ctx, "could not list a moved directory; caches may keep paths below it", "endpoint", m.name, "path", dir+rel, "err", err)
			continue
		}
		for _, it := range items {
			if it.Name == "" || strings.Contains(it.Name, "/") {
				continue
			}
			p := rel + "/" + it.Name
			out = append(out, p)
			if it.IsDir {
				queue = append(queue, p)
			}
		}
	}
	if len(out) >= maxMovedPaths {
		f.log.Warn("moved directory too large to tell every path to the caches", "endpoint", m.name, "path", dir, "told", len(out))
	}
	return out
}

// Rmdir removes the empty directory p from every endpoint that has it.
// Empty means empty across the federation: the merged listing has no
// entry, and every endpoint that could hold one answered. A missing p is
// ErrNotFound, a file ErrRefused, a directory with entries
// endpoint.ErrNotEmpty; nothing is removed then.
func (f *Federator) Rmdir(ctx context.Context, p string, o WriteOptions) (err error) {
	s := f.snap.Load()
	finish, err := f.writing(ctx, s, p)
	if err != nil {
		return err
	}
	defer finish(&err)
	refuse := func(code int, class error, format string, args ...any) error {
		return writeErr(code, class, "lakefed: rmdir %s: %s", p, fmt.Sprintf(format, args...))
	}
	if p == "/" {
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "the root cannot be removed")
	}
	e := f.locate(ctx, s, p, o.Hops, false)
	switch {
	case e.status != http.StatusOK:
		code, msg := missingReport(p, e)
		return writeErr(code, endpoint.ClassOfStatus(code), "%s", msg)
	case !e.isDir:
		return refuse(http.StatusConflict, endpoint.ErrRefused, "not a directory")
	case len(e.replicas) == 0:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "a directory of the federation itself (a parent of an endpoint's prefix) cannot be removed")
	case e.incomplete:
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"nothing removed: %s could not be asked, and may hold the directory", strings.Join(unanswered(e, true), ", "))
	}
	for _, rep := range e.replicas {
		if !rep.m.writable {
			return refuse(http.StatusForbidden, endpoint.ErrRefused, "nothing removed: %s holds it and is read-only in this federation", rep.m.name)
		}
	}
	l := f.list(ctx, s, p, o.Hops)
	for _, a := range l.answers {
		if a.kind == ansUnavailable || a.kind == ansDown {
			return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
				"nothing removed: %s could not be listed, and may hold entries in it", a.m.name)
		}
	}
	if len(l.items) > 0 {
		return writeErr(http.StatusConflict, endpoint.ErrNotEmpty, "lakefed: rmdir %s: %d entries (%s...)", p, len(l.items), l.items[0].Name)
	}
	if o.Hops > 0 {
		ctx = httpx.WithHops(ctx, o.Hops)
	}
	errs := f.deleteReplicas(ctx, s, e.replicas, false)
	status, report := deleteReport(e, errs)
	if status == http.StatusNoContent {
		return nil
	}
	var class error = endpoint.ClassOfStatus(status)
	for _, err := range errs {
		if errors.Is(err, endpoint.ErrNotEmpty) {
			class = endpoint.ErrNotEmpty // an entry appeared since the listing
		}
	}
	return writeErr(status, class, "lakefed: rmdir %s: %s", p, report)
}

// one returns the replica of a file an in-place change (truncate) acts
// on, or the refusal: the file must exist, be held by one writable
// endpoint, and every endpoint that could hold it must have answered.
func (f *Federator) one(ctx context.Context, s *snapshot, op, p string, o WriteOptions) (*replica, error) {
	refuse := func(code int, class error, format string, args ...any) (*replica, error) {
		return nil, writeErr(code, class, "lakefed: %s %s: %s; nothing was changed", op, p, fmt.Sprintf(format, args...))
	}
	e := f.locate(ctx, s, p, o.Hops, false)
	switch {
	case e.status != http.StatusOK:
		code, msg := missingReport(p, e)
		return nil, writeErr(code, endpoint.ClassOfStatus(code), "%s", msg)
	case e.isDir:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "is a directory")
	case e.incomplete:
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"%s could not be asked, and may hold a copy that would stay as it is", strings.Join(unanswered(e, true), ", "))
	case len(e.replicas) > 1:
		return refuse(http.StatusForbidden, endpoint.ErrUnsupported,
			"held by %s: an in-place change on several endpoints cannot be made all-or-nothing (one may fail after another succeeded)",
			strings.Join(replicaNames(e.replicas), ", "))
	case !e.replicas[0].m.writable:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "on %s, read-only in this federation", e.replicas[0].m.name)
	}
	return e.replicas[0], nil
}

// Truncate sets the size of the file p in place (endpoint.Truncater):
// cut, or extended with zero bytes. p must be held by one writable
// endpoint whose kind can truncate.
func (f *Federator) Truncate(ctx context.Context, p string, size int64, o WriteOptions) (err error) {
	s := f.snap.Load()
	finish, err := f.writing(ctx, s, p)
	if err != nil {
		return err
	}
	defer finish(&err)
	if size < 0 {
		return writeErr(http.StatusBadRequest, endpoint.ErrRefused, "lakefed: truncate %s: negative size %d", p, size)
	}
	rep, err := f.one(ctx, s, "truncate", p, o)
	if err != nil {
		return err
	}
	m := rep.m
	if _, ok := m.ep.(endpoint.Truncater); !ok {
		return writeErr(http.StatusForbidden, endpoint.ErrUnsupported, "lakefed: truncate %s: on %s, of kind %s, which cannot change a file in place; nothing was changed", p, m.name, m.kind())
	}
	return f.onMember(ctx, s, m, o, "truncate", p, func(ctx context.Context) error {
		return endpoint.Truncate(ctx, m.ep, rep.path, size)
	})
}

// onMember runs op on m under m's timeout, with the passive health
// check, and wraps its error.
func (f *Federator) onMember(ctx context.Context, s *snapshot, m *member, o WriteOptions, op, p string, fn func(context.Context) error) error {
	if !m.h.Up() {
		return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s %s: %s is down; nothing was changed", op, p, m.name)
	}
	if o.Hops > 0 {
		ctx = httpx.WithHops(ctx, o.Hops)
	}
	rctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
	defer cancel()
	start := time.Now()
	err := fn(rctx)
	if err != nil && ctx.Err() != nil {
		return writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: %s %s on %s: %v", op, p, m.name, err)
	}
	f.requestResult(s, m, err, time.Since(start))
	if err != nil {
		return writeErr(endpoint.HTTPStatus(err), err, "lakefed: %s %s on %s", op, p, m.name)
	}
	return nil
}

// Chmod sets the permission bits of p (endpoint.Chmoder) on every
// endpoint that holds it. Every one must be writable in the federation
// and of a kind that has permissions, or nothing is changed; when one of
// them fails, the answer says which did and which did not (a chmod
// asked again repairs that).
func (f *Federator) Chmod(ctx context.Context, p string, mode fs.FileMode, o WriteOptions) (err error) {
	s := f.snap.Load()
	finish, err := f.writing(ctx, s, p)
	if err != nil {
		return err
	}
	defer finish(&err)
	refuse := func(code int, class error, format string, args ...any) error {
		return writeErr(code, class, "lakefed: chmod %s: %s; nothing was changed", p, fmt.Sprintf(format, args...))
	}
	e := f.locate(ctx, s, p, o.Hops, false)
	switch {
	case e.status != http.StatusOK:
		code, msg := missingReport(p, e)
		return writeErr(code, endpoint.ClassOfStatus(code), "%s", msg)
	case len(e.replicas) == 0:
		return refuse(http.StatusForbidden, endpoint.ErrRefused, "a directory of the federation itself has no permissions of its own")
	case e.incomplete:
		return refuse(http.StatusServiceUnavailable, endpoint.ErrUnavailable,
			"%s could not be asked, and may hold a copy that would keep its mode", strings.Join(unanswered(e, true), ", "))
	}
	for _, rep := range e.replicas {
		if !rep.m.writable {
			return refuse(http.StatusForbidden, endpoint.ErrRefused, "%s holds it and is read-only in this federation", rep.m.name)
		}
		if _, ok := rep.m.ep.(endpoint.Chmoder); !ok {
			return refuse(http.StatusForbidden, endpoint.ErrUnsupported, "%s holds it and is of kind %s, which has no permissions to set", rep.m.name, rep.m.kind())
		}
	}
	errs := make([]error, len(e.replicas))
	var wg sync.WaitGroup
	for i, rep := range e.replicas {
		wg.Go(func() {
			errs[i] = f.onMember(ctx, s, rep.m, o, "chmod", p, func(ctx context.Context) error {
				return endpoint.Chmod(ctx, rep.m.ep, rep.path, mode)
			})
		})
	}
	wg.Wait()
	var done, failed []string
	var worst error
	for i, rep := range e.replicas {
		if errs[i] == nil {
			done = append(done, rep.m.name)
			continue
		}
		failed = append(failed, fmt.Sprintf("%s (%v)", rep.m.name, errs[i]))
		if worst == nil || endpoint.Class(errs[i]) == endpoint.ErrUnavailable {
			worst = errs[i]
		}
	}
	if worst == nil {
		return nil
	}
	code, _, _ := httpx.StatusOf(worst)
	return writeErr(code, worst, "lakefed: chmod %s: done on %d of %d endpoints (%s); failed: %s",
		p, len(done), len(e.replicas), strings.Join(done, ", "), strings.Join(failed, "; "))
}

// Space adds up the capacity the endpoints that take writes of p report
// (endpoint.SpaceReporter): the healthy writable local endpoints whose
// prefix holds p. Endpoints of kinds that cannot tell (S3, WebDAV
// servers without RFC 4331 quota) are left out, and when none can tell,
// the answer is endpoint.ErrUnsupported naming them.
func (f *Federator) Space(ctx context.Context, p string) (endpoint.Space, error) {
	s := f.snap.Load()
	cands, down := writable(s, p, s.cfg.MaxHops) // never upstreams: their space is theirs
	if len(cands) == 0 {
		if down > 0 {
			return endpoint.Space{}, writeErr(http.StatusServiceUnavailable, endpoint.ErrUnavailable, "lakefed: space %s: every writable endpoint for this path is down", p)
		}
		return endpoint.Space{}, writeErr(http.StatusForbidden, endpoint.ErrUnsupported, "lakefed: space %s: no writable endpoint holds this path", p)
	}
	sps := make([]endpoint.Space, len(cands))
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, m := range cands {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, m.cfg.TimeoutOrDefault())
			defer cancel()
			sps[i], errs[i] = endpoint.SpaceOf(sctx, m.ep, m.endpointPath(p))
		})
	}
	wg.Wait()
	var sum endpoint.Space
	known := 0
	var unknown []string
	for i, m := range cands {
		if errs[i] != nil {
			unknown = append(unknown, fmt.Sprintf("%s (%s: %v)", m.name, m.kind(), errs[i]))
			continue
		}
		known++
		sum.Total += sps[i].Total
		sum.Free += sps[i].Free
		sum.Used += sps[i].Used
		sum.LargestFree = max(sum.LargestFree, sps[i].LargestFree)
	}
	if known == 0 {
		return endpoint.Space{}, writeErr(http.StatusForbidden, endpoint.ErrUnsupported,
			"lakefed: space %s: no endpoint that takes writes here reports its capacity: %s", p, strings.Join(unknown, "; "))
	}
	return sum, nil
}

// locations lists the endpoints holding p, best first for a file.
func (f *Federator) locations(ctx context.Context, p string) ([]endpoint.Location, error) {
	s := f.snap.Load()
	e := f.lookup(ctx, s, p, 0)
	if e.status != http.StatusOK {
		return nil, errOfStatus(p, e.status)
	}
	reps := e.replicas
	if !e.isDir {
		reps = reps[:0:0]
		for _, x := range f.rank(s, e, netip.Addr{}, nil, nil) {
			reps = append(reps, x.r)
		}
	}
	out := make([]endpoint.Location, 0, len(reps))
	for _, rep := range reps {
		u, err := url.Parse(rep.m.url)
		if err != nil {
			continue
		}
		u.Path = path.Join("/", u.Path, rep.path)
		u.RawPath, u.RawQuery, u.Fragment = "", "", ""
		out = append(out, endpoint.Location{Endpoint: rep.m.name, URL: u, Writable: rep.m.writable})
	}
	return out, nil
}

var (
	_ endpoint.Renamer       = (*Namespace)(nil)
	_ endpoint.Truncater     = (*Namespace)(nil)
	_ endpoint.Chmoder       = (*Namespace)(nil)
	_ endpoint.DirRemover    = (*Namespace)(nil)
	_ endpoint.SpaceReporter = (*Namespace)(nil)
	_ endpoint.Locator       = (*Namespace)(nil)
)

// Rename moves from to to within one endpoint (Federator.Move).
func (n *Namespace) Rename(ctx context.Context, from, to string) error {
	_, err := n.f.Move(ctx, from, to, WriteOptions{})
	return err
}

// Rmdir removes the empty directory p (Federator.Rmdir).
func (n *Namespace) Rmdir(ctx context.Context, p string) error {
	return n.f.Rmdir(ctx, p, WriteOptions{})
}

// Truncate sets the size of the file p (Federator.Truncate).
func (n *Namespace) Truncate(ctx context.Context, p string, size int64) error {
	return n.f.Truncate(ctx, p, size, WriteOptions{})
}

// Chmod sets the permission bits of p (Federator.Chmod).
func (n *Namespace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	return n.f.Chmod(ctx, p, mode, WriteOptions{})
}

// Space is the capacity of the endpoints that take writes of p
// (Federator.Space).
func (n *Namespace) Space(ctx context.Context, p string) (endpoint.Space, error) {
	return n.f.Space(ctx, p)
}

// Locations lists the endpoints holding p, with their own URLs of it
// (root:// for an XRootD server) and whether the federation writes to
// them.
func (n *Namespace) Locations(ctx context.Context, p string) ([]endpoint.Location, error) {
	return n.f.locations(ctx, p)
}

// serveMove is the HTTP adapter of Move (RFC 4918 §9.9): the
// Destination must be on this federator (502 otherwise, §9.9.4);
// Overwrite: F is If-None-Match: * on it. 201 when the destination is
// new, 204 when it was replaced.
func (f *Federator) serveMove(rq *request) {
	w, r := rq.w, rq.r
	if d := r.Header.Get("Depth"); d != "" && !strings.EqualFold(d, "infinity") {
		httpError(w, http.StatusBadRequest, "lakefed: MOVE takes no Depth but infinity (RFC 4918 §9.9.2)")
		return
	}
	u, err := url.Parse(r.Header.Get("Destination"))
	if err != nil || u.Path == "" {
		httpError(w, http.StatusBadRequest, "lakefed: MOVE needs a Destination header naming a path")
		return
	}
	if u.Host != "" && !strings.EqualFold(u.Host, r.Host) {
		httpError(w, http.StatusBadGateway, "lakefed: MOVE to another server is not a rename (RFC 4918 §9.9.4)")
		return
	}
	to, err := httpx.CleanPath(u.Path)
	if err != nil {
		httpError(w, http.StatusBadRequest, "lakefed: Destination: "+err.Error())
		return
	}
	o := WriteOptions{Hops: rq.hops}
	switch ow := strings.ToUpper(strings.TrimSpace(r.Header.Get("Overwrite"))); ow {
	case "", "T":
	case "F":
		o.Cond = http.Header{"If-None-Match": {"*"}}
	default:
		httpError(w, http.StatusBadRequest, "lakefed: bad Overwrite header: want T or F")
		return
	}
	created, err := f.move(r.Context(), rq.s, rq.p, to, o)
	if err != nil {
		f.writeFailed(rq, err)
		return
	}
	if created {
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
