package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/keptsum"
)

// Kept checksums. A file's checksums are kept in a sidecar file under
// Root (package keptsum has the format, and why it is a sidecar keyed by
// inode with a ctime fingerprint). The posix endpoint kind reads the same
// sidecars when its root is this Root.
//
// When a sum is kept here:
//   - Computed on request (computeSums): once the file has settled
//     (keptsum.Settled). A file changed less than keptsum.SettleWindow ago
//     makes that request wait for the rest of the window (once: then the
//     sum is kept).
//   - PUT keeps the adler32 it computed while receiving (and md5/crc32c
//     when the client sent them), with the fingerprint taken after the
//     rename (rename moves the ctime). A local process writing the file in
//     the same clock tick as the rename, without changing its size, is
//     not seen; no client of the server can do that (its writes to the
//     path wait for the PUT's path lock).
//   - COPY and MOVE carry the source's sums to the destination.
//
// PUT removes the sidecar of the file it replaces; the janitor sweeps
// those DELETE and MOVE leave (janitor.go).
const sumBufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, sumBufSize); return &b }}

// sumRoot is Root as keptsum sees it: sidecars are read through openRel
// (one openat2 where the kernel has it) and written through s.root.
type sumRoot struct {
	*os.Root
	s *Server
}

// OpenFile opens name below Root; reads go through openRel.
func (r sumRoot) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) == 0 {
		return r.s.openRel(name, flag)
	}
	return r.Root.OpenFile(name, flag, perm)
}

// sumRoot returns Root for keptsum.
func (s *Server) sumRoot() sumRoot { return sumRoot{Root: s.root, s: s} }

// keptSums returns the kept checksums valid for the file st (nil when
// there are none).
func (s *Server) keptSums(st *unix.Stat_t) map[string]string {
	return keptsum.Read(s.sumRoot(), st)
}

// cachedSum returns the kept checksum of algo for the file st.
func (s *Server) cachedSum(algo string, st *unix.Stat_t) (string, bool) {
	v, ok := s.keptSums(st)[algo]
	return v, ok
}

// storeSums keeps sums for the file st (keptsum.Write). Failures only
// mean a later request computes again; the error is for tests.
func (s *Server) storeSums(st *unix.Stat_t, sums map[string]string) error {
	return keptsum.Write(s.sumRoot(), st, sums)
}

// dropSums removes the sidecar of the file st, which is gone: replaced by
// a PUT, and not linked elsewhere.
func (s *Server) dropSums(st *unix.Stat_t) { keptsum.Drop(s.sumRoot(), st) }

// copySums returns the kept sums of the source of a copy, unless its ctime
// is too recent to tell a change made during the copy (keptsum.Settle).
func (s *Server) copySums(st *unix.Stat_t) map[string]string {
	if d, keep := keptsum.Settle(st, time.Now()); d > 0 || !keep {
		return nil
	}
	return s.keptSums(st)
}

// checksums returns the wanted checksums of the open regular file f
// (stat st), the kept ones when the fingerprint matches, else by reading
// the file once for all missing algorithms. Concurrent requests for the
// same file version and algorithms share one read.
func (s *Server) checksums(ctx context.Context, f *os.File, name string, st *unix.Stat_t, algos []string) (map[string]string, error) {
	kept := s.keptSums(st)
	sums := make(map[string]string, len(algos))
	var missing []string
	for _, a := range algos {
		if v, ok := kept[a]; ok {
			sums[a] = v
			s.m.cacheHits.Inc()
		} else {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return sums, nil
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%s", name, keptsum.Fingerprint(st), st.Ino, strings.Join(missing, ","))
	v, err, _ := s.sums.Do(key, func() (any, error) { return s.computeSums(ctx, f, st, missing) })
	if err != nil {
		return nil, err
	}
	for a, sum := range v.(map[string]string) {
		sums[a] = sum
	}
	return sums, nil
}

// computeSums reads f once from the start, hashing with every algorithm,
// and keeps the results unless the file changed meanwhile. A file changed
// less than keptsum.SettleWindow ago is read only once the window has
// passed; if the request ends first, the sums are computed at once and
// not kept. The read itself goes on after the request ends: concurrent
// requests share it (checksums).
func (s *Server) computeSums(ctx context.Context, f *os.File, st *unix.Stat_t, algos []string) (map[string]string, error) {
	s.m.computed.Inc()
	keep, err := keptsum.Settled(ctx, f, st)
	if err != nil {
		return nil, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	out, err := keptsum.Sum(io.NewSectionReader(f, 0, 1<<62), f, st, algos, *bp)
	if err != nil {
		if !errors.Is(err, keptsum.ErrChanged) {
			err = fmt.Errorf("storage: checksum: %w", err)
		}
		return nil, err
	}
	if keep {
		_ = s.storeSums(st, out)
	}
	return out, nil
}
