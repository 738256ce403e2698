package posix

import (
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/httpx"
)

// sumXattrPrefix names the extended attributes in which the storage role
// caches checksums: "user.lakefed.<algo>" = "<hex> <size> <mtime-ns>". The
// size and mtime are the file's fingerprint when the value was computed;
// a value whose fingerprint differs from the file's is stale and ignored.
// This package only reads them (the storage role owns writing, with its
// rule for files modified a moment ago).
const sumXattrPrefix = "user.lakefed."

// cachedSums returns the checksums cached on the file at host path r
// whose fingerprint matches fi, or nil. It costs one getxattr per
// algorithm and never reads the file.
func cachedSums(r string, fi fs.FileInfo) map[string]string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.IsDir() {
		return nil
	}
	var out map[string]string
	var buf [128]byte
	for _, algo := range []string{httpx.Adler32, httpx.MD5, httpx.CRC32C} {
		n, err := unix.Getxattr(r, sumXattrPrefix+algo, buf[:])
		if err != nil {
			if err == unix.ENOTSUP {
				return out // no xattrs on this file system: stop asking
			}
			continue
		}
		if v, ok := parseSum(string(buf[:n]), st.Size, st.Mtim.Nano()); ok {
			if out == nil {
				out = make(map[string]string, 3)
			}
			out[algo] = v
		}
	}
	return out
}

// parseSum checks a cached value against the file's size and mtime.
func parseSum(v string, size, mtimeNs int64) (string, bool) {
	sum, rest, ok := strings.Cut(v, " ")
	if !ok || sum == "" {
		return "", false
	}
	sz, mt, ok := strings.Cut(rest, " ")
	if !ok || sz != strconv.FormatInt(size, 10) || mt != strconv.FormatInt(mtimeNs, 10) {
		return "", false
	}
	return strings.ToLower(sum), true
}
