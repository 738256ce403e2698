package storage

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// Checksums are cached in an extended attribute per algorithm,
// "user.lakefed.<algo>", holding "<hex> <size> <mtime-ns>". The size and
// mtime are the file's fingerprint when the value was computed: a value
// whose fingerprint differs from the file's current one is ignored, so a
// changed file never shows an old checksum. xattrs travel with the inode,
// so rename (MOVE) keeps them and a replacing PUT brings its own.
//
// Limit: a rewrite that keeps the size and lands in the same mtime tick
// (ext4: ~ns, but coarser on some file systems) cannot be told apart. To
// narrow that window, a checksum computed for a file modified less than
// racyWindow ago is returned but not stored (git's "racy" rule).
//
// On a file system without user xattrs nothing is stored and each request
// that wants a digest reads the file again.
const (
	sumXattrPrefix = "user.lakefed."
	racyWindow     = 2 * time.Second
	sumBufSize     = 1 << 20
)

var bufPool = sync.Pool{New: func() any { b := make([]byte, sumBufSize); return &b }}

// cachedSum returns the stored checksum of algo for the open file fd if
// its fingerprint matches st.
func cachedSum(fd int, algo string, st *unix.Stat_t) (string, bool) {
	var buf [128]byte
	n, err := unix.Fgetxattr(fd, sumXattrPrefix+algo, buf[:])
	if err != nil || n <= 0 {
		return "", false
	}
	v := string(buf[:n])
	sum, rest, ok := strings.Cut(v, " ")
	if !ok {
		return "", false
	}
	size, mt, ok := strings.Cut(rest, " ")
	if !ok || size != strconv.FormatInt(st.Size, 10) || mt != strconv.FormatInt(st.Mtim.Nano(), 10) {
		return "", false
	}
	return sum, true
}

// storeSum records a checksum with the fingerprint st. Failures (no xattr
// support, read-only file system) only mean the next request recomputes.
func storeSum(fd int, algo, sum string, st *unix.Stat_t) error {
	v := sum + " " + strconv.FormatInt(st.Size, 10) + " " + strconv.FormatInt(st.Mtim.Nano(), 10)
	return unix.Fsetxattr(fd, sumXattrPrefix+algo, []byte(v), 0)
}

// checksums returns the wanted checksums of the open regular file f
// (stat st), from the xattr cache when the fingerprint matches, else by
// reading the file once for all missing algorithms. Concurrent requests
// for the same file and algorithms share one read.
func (s *Server) checksums(ctx context.Context, f *os.File, name string, st *unix.Stat_t, algos []string) (map[string]string, error) {
	fd := int(f.Fd())
	sums := make(map[string]string, len(algos))
	var missing []string
	for _, a := range algos {
		if v, ok := cachedSum(fd, a, st); ok {
			sums[a] = v
			s.m.cacheHits.Inc()
		} else {
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return sums, nil
	}
	key := fmt.Sprintf("%s\x00%d\x00%d\x00%s", name, st.Size, st.Mtim.Nano(), strings.Join(missing, ","))
	v, err, _ := s.sums.Do(key, func() (any, error) { return s.computeSums(f, st, missing) })
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
// and stores the results unless the file changed meanwhile or is racy.
func (s *Server) computeSums(f *os.File, st *unix.Stat_t, algos []string) (map[string]string, error) {
	s.m.computed.Inc()
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
	fd := int(f.Fd())
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("storage: checksum: %w", err)
	}
	if n != st.Size || after.Size != st.Size || after.Mtim != st.Mtim {
		return nil, errChanged
	}
	out := make(map[string]string, len(algos))
	racy := time.Since(time.Unix(st.Mtim.Sec, st.Mtim.Nsec)) < racyWindow
	for i, a := range algos {
		out[a] = httpx.SumString(hs[i])
		if !racy {
			_ = storeSum(fd, a, out[a], st)
		}
	}
	return out, nil
}
