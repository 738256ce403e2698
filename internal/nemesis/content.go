package nemesis

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
)

// MaxSize is the largest file the workload writes: a few blocks of the
// lake's caches (the runner sets their block size to 64 KiB), so reads
// cross block boundaries.
const MaxSize = 300 << 10

// minSize keeps the header whole in every file.
const minSize = 256

// Header is the first line of every file the workload or the nemesis
// writes: the file says which write made it.
func Header(path string, version int) string {
	return fmt.Sprintf("path=%s version=%d\n", path, version)
}

// seed is the (path, version) pair's seed for its size and its bytes.
func seed(path string, version int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(path))
	return h.Sum64() ^ uint64(version)*0x9e3779b97f4a7c15
}

// Size is the size of version of path: a deterministic function of both,
// so that a HEAD's Content-Length names the versions it can be.
func Size(path string, version int) int64 {
	r := rand.New(rand.NewPCG(seed(path, version), 1))
	// Mostly small files, some of several cache blocks.
	if r.IntN(4) == 0 {
		return int64(minSize + r.IntN(MaxSize-minSize))
	}
	return int64(minSize + r.IntN(16<<10))
}

// Content is the whole of version of path: Header, then pseudo-random
// bytes seeded by (path, version), Size bytes in all. Any range of it
// differs from the same range of any other version (but for ranges of a
// few bytes, by chance), so a read can be traced to the write it came
// from.
func Content(path string, version int) []byte {
	n := Size(path, version)
	b := make([]byte, n)
	h := copy(b, Header(path, version))
	r := rand.New(rand.NewPCG(seed(path, version), 2))
	for i := h; i < len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// Decoded is what a read's bytes were traced to.
type Decoded struct {
	// Versions are the versions the bytes can be: those whose bytes
	// they are (usually one), two for a mix (the first one's bytes, then the
	// second's), none for bytes no candidate produced.
	Versions []int
	// Mixed: the bytes begin as one version and go on as another.
	Mixed bool
	// Unknown: the bytes match no candidate, whole or mixed.
	Unknown bool
}

// Decode traces b, read from path at offset off, to the candidate
// versions (every version written to the path by the time the read
// ended). content returns a version's bytes (Content, or a cache of it).
func Decode(path string, off int64, b []byte, candidates []int, content func(string, int) []byte) Decoded {
	whole := map[int][]byte{}
	span := func(v int) []byte {
		c, ok := whole[v]
		if !ok {
			c = content(path, v)
			whole[v] = c
		}
		if off >= int64(len(c)) {
			return nil
		}
		return c[off:min(int64(len(c)), off+int64(len(b)))]
	}
	// Every version the bytes can be: a range inside the header, or a
	// few bytes by chance, may be several.
	var match []int
	for _, v := range candidates {
		if s := span(v); len(s) == len(b) && bytes.Equal(s, b) {
			match = append(match, v)
		}
	}
	if len(match) > 0 {
		return Decoded{Versions: match}
	}
	// A mix: the longest prefix any candidate explains, then the rest
	// from another one at the same offsets.
	best, bestLen := 0, -1
	for _, v := range candidates {
		s := span(v)
		n := 0
		for n < len(s) && n < len(b) && s[n] == b[n] {
			n++
		}
		if n > bestLen {
			best, bestLen = v, n
		}
	}
	// A byte of the second version may equal the first's by chance:
	// try the split a few bytes earlier too.
	for cut := bestLen; cut > 0 && cut >= bestLen-8; cut-- {
		rest, at := b[cut:], off+int64(cut)
		for _, v := range candidates {
			if v == best {
				continue
			}
			c := whole[v]
			if at+int64(len(rest)) <= int64(len(c)) && bytes.Equal(c[at:at+int64(len(rest))], rest) {
				return Decoded{Versions: []int{best, v}, Mixed: true}
			}
		}
	}
	return Decoded{Unknown: true}
}

// SizeVersions returns the candidates whose size is size: what a HEAD's
// Content-Length can be.
func SizeVersions(path string, size int64, candidates []int) []int {
	var out []int
	for _, v := range candidates {
		if Size(path, v) == size {
			out = append(out, v)
		}
	}
	return out
}
