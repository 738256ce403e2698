package storage

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Kept checksums. A file's checksums are kept in a sidecar file,
// Root/.lakefed-sums/.lakefed-sum-<dev>-<inode> (hex), which holds the
// fingerprint of the file they were computed for, "<size> <mtime-ns>
// <ctime-ns>", then one "<algo> <hex>" line per algorithm. A sidecar
// whose fingerprint differs from the file's current one is ignored, so a
// changed file never shows an old checksum.
//
// Why ctime, and why a sidecar: size and mtime alone miss a same-size
// rewrite in place whose mtime is then set back (touch -d, rsync -t,
// tar x). Users cannot set the ctime, and every change of content or
// metadata moves it; the inode tells a replaced file from its successor.
// But setting an xattr on the file moves its ctime too (as does rename),
// so a ctime fingerprint kept in the file's own xattr invalidates itself
// the moment it is written. The sidecar is another inode: keeping a
// checksum changes nothing about the file, so neither its fingerprint
// nor its ETag (which has the ctime too). It also works where user
// xattrs do not.
//
// When a sum is trusted:
//   - Computed on request (computeSums): the file is read only once its
//     ctime is settleWindow old. Any change after that gets a later ctime
//     (the kernel stamps ctime from a clock of at most one tick, ≤ 10 ms,
//     granularity), and the fstat after the read catches changes during
//     it; so the sum kept matches the fingerprint kept. A file changed
//     less than settleWindow ago makes that request wait for the rest of
//     the window (once: then the sum is kept). On a file system whose
//     timestamps have whole seconds (ctime ns = 0), the sum of a file
//     changed less than coarseWindow ago is returned but not kept.
//   - PUT keeps the adler32 it computed while receiving (and md5/crc32c
//     when the client sent them), with the fingerprint taken after the
//     rename (rename moves the ctime). A local process writing the file in
//     the same clock tick as the rename, without changing its size, is
//     not seen; no client of the server can do that (its writes to the
//     path wait for the PUT's path lock).
//
// Stale sidecars (of files deleted or replaced) are never wrong, only
// unused: a reused inode has a newer ctime. PUT removes the one of the
// file it replaces.
// TODO(storage): DELETE and MOVE leave theirs; sweep them with the janitor.
const (
	sumsDir      = reservedPrefix + "sums"
	settleWindow = 50 * time.Millisecond
	coarseWindow = 2 * time.Second
	sumBufSize   = 1 << 20
	maxSidecar   = 512 // bytes read of a sidecar; three sums need < 100
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, sumBufSize); return &b }}

// sidecarName is the path, relative to Root, of the sidecar of the file
// with stat st. The name has the reserved prefix too, as every name the
// server owns: whatever skips those (listings, the janitor's checks)
// skips sidecars.
func sidecarName(st *unix.Stat_t) string {
	return sumsDir + "/" + reservedPrefix + "sum-" + strconv.FormatUint(st.Dev, 16) + "-" + strconv.FormatUint(st.Ino, 16)
}

// fingerprint is the first line of a sidecar for the file st.
func fingerprint(st *unix.Stat_t) string {
	return strconv.FormatInt(st.Size, 10) + " " + strconv.FormatInt(st.Mtim.Nano(), 10) + " " + strconv.FormatInt(st.Ctim.Nano(), 10)
}

// sameVersion reports whether a and b are the same file unchanged: same
// inode, size, mtime and ctime.
func sameVersion(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// keptSums returns the kept checksums valid for the file st (nil when
// there are none).
func (s *Server) keptSums(st *unix.Stat_t) map[string]string {
	f, err := s.openRel(sidecarName(st), unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil
	}
	var buf [maxSidecar]byte
	n, _ := io.ReadFull(f, buf[:])
	f.Close()
	return parseSidecar(string(buf[:n]), st)
}

// parseSidecar returns the sums in a sidecar's text if its fingerprint is
// st's; lines that are not a known algorithm with a well-formed value are
// skipped.
func parseSidecar(text string, st *unix.Stat_t) map[string]string {
	first, rest, ok := strings.Cut(text, "\n")
	if !ok || first != fingerprint(st) {
		return nil
	}
	var sums map[string]string
	for line := range strings.SplitSeq(rest, "\n") {
		algo, v, ok := strings.Cut(line, " ")
		if !ok || !wellFormedSum(algo, v) {
			continue
		}
		if sums == nil {
			sums = map[string]string{}
		}
		sums[algo] = v
	}
	return sums
}

// wellFormedSum reports whether v is a lower-case hex value of algo's
// length, the form SumString writes.
func wellFormedSum(algo, v string) bool {
	want := 8
	switch algo {
	case httpx.MD5:
		want = 32
	case httpx.Adler32, httpx.CRC32C:
	default:
		return false
	}
	if len(v) != want {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// cachedSum returns the kept checksum of algo for the file st.
func (s *Server) cachedSum(algo string, st *unix.Stat_t) (string, bool) {
	v, ok := s.keptSums(st)[algo]
	return v, ok
}

// storeSums keeps sums for the file st, merged with those already kept
// for the same fingerprint. The sidecar is replaced by rename, so a reader
// sees the old or the new one whole. Failures (read-only Root, disk full)
// only mean a later request computes again; the error is for tests.
func (s *Server) storeSums(st *unix.Stat_t, sums map[string]string) error {
	if len(sums) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(fingerprint(st))
	b.WriteByte('\n')
	kept := s.keptSums(st)
	for _, a := range []string{httpx.Adler32, httpx.CRC32C, httpx.MD5} {
		v, ok := sums[a]
		if !ok {
			v, ok = kept[a]
		}
		if ok && wellFormedSum(a, v) {
			b.WriteString(a + " " + v + "\n")
		}
	}
	if err := s.root.Mkdir(sumsDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// The upload prefix: the janitor removes it if a crash leaves it.
	tmp := path.Join(sumsDir, tempName())
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, sidecarName(st))
	}
	if err != nil {
		s.root.Remove(tmp)
	}
	return err
}

// dropSums removes the sidecar of the file st, which is gone: replaced by
// a PUT, and not linked elsewhere.
func (s *Server) dropSums(st *unix.Stat_t) {
	if st.Nlink <= 1 {
		s.root.Remove(sidecarName(st))
	}
}

// copySums returns the kept sums of the source of a copy, unless its ctime
// is too recent to tell a change made during the copy (see settle).
func (s *Server) copySums(st *unix.Stat_t) map[string]string {
	if d, keep := settle(st, time.Now()); d > 0 || !keep {
		return nil
	}
	return s.keptSums(st)
}

// settle says how long to wait before reading the file st so that a sum
// computed from the read can be kept with st's fingerprint (0: at once),
// or keep false when it cannot be kept at all (coarse timestamps, or a
// ctime in the future: the clock was set back).
func settle(st *unix.Stat_t, now time.Time) (wait time.Duration, keep bool) {
	age := now.Sub(time.Unix(st.Ctim.Unix()))
	switch {
	case age < 0:
		return 0, false
	case st.Ctim.Nsec == 0:
		return 0, age >= coarseWindow
	case age >= settleWindow:
		return 0, true
	}
	return settleWindow - age, true
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
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%s", name, fingerprint(st), st.Ino, strings.Join(missing, ","))
	v, err, _ := s.sums.Do(key, func() (any, error) { return s.computeSums(ctx, f, st, missing) })
	if err != nil {
		return nil, err
	}
	for a, sum := range v.(map[string]string) {
		sums[a] = sum
	}
	return sums, nil
}

// errChanged says a file changed while its checksum was being computed.
var errChanged = errors.New("storage: file changed while computing its checksum")

// computeSums reads f once from the start, hashing with every algorithm,
// and keeps the results unless the file changed meanwhile. A file changed
// less than settleWindow ago is read only once the window has passed (see
// the comment at the top); if the request ends first, the sums are
// computed at once and not kept.
func (s *Server) computeSums(ctx context.Context, f *os.File, st *unix.Stat_t, algos []string) (map[string]string, error) {
	s.m.computed.Inc()
	fd := int(f.Fd())
	wait, keep := settle(st, time.Now())
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			var now unix.Stat_t
			if err := unix.Fstat(fd, &now); err != nil {
				return nil, fmt.Errorf("storage: checksum: %w", err)
			}
			if !sameVersion(&now, st) {
				return nil, errChanged
			}
		case <-ctx.Done():
			t.Stop()
			keep = false
		}
	}
	hs := make([]hash.Hash, len(algos))
	ws := make([]io.Writer, len(algos))
	for i, a := range algos {
		hs[i] = httpx.NewHash(a)
		ws[i] = hs[i]
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	n, err := io.CopyBuffer(io.MultiWriter(ws...), io.NewSectionReader(f, 0, 1<<62), *bp)
	if err != nil {
		return nil, fmt.Errorf("storage: checksum: %w", err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("storage: checksum: %w", err)
	}
	if n != st.Size || !sameVersion(&after, st) {
		return nil, errChanged
	}
	out := make(map[string]string, len(algos))
	for i, a := range algos {
		out[a] = httpx.SumString(hs[i])
	}
	if keep {
		_ = s.storeSums(st, out)
	}
	return out, nil
}
