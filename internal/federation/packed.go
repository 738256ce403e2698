package federation

import (
	"encoding/binary"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A packed entry is how the metadata cache keeps an entry it is not
// serving often (mdCache): one string holding the path and what the
// entry's readers need, 96 bytes for a file on three sites and a path
// of 20 where the entry itself, its replicas and their header values
// took 1,250 (bench/cmd/entrybytes, 2×10^5 entries). The cache turns it back
// into an entry (unpack) when the path is asked for again, and keeps
// that entry while it is hot.
//
// The string starts with a header that the cache reads in place:
//
//	[0:8]  expires, unix ns, little endian
//	[8]    pk* flags
//	[9:]   uvarint length of the path, the path
//
// then, unless pkPending or pkFat, the body (packEntry): the entry's
// size and checksums, its answers unless they are exactly its
// replicas found, and its replicas, each with its member as an index
// into the cache's members, its version, its URL when not derived
// (replica.derived) and its entity tag squeezed by packETag.
//
// Only a 200 entry is packed; a negative one (404, kept for
// negative_ttl only, whose answers' errors fill its body) and the few
// that hold what the body has no room for (a member the cache does not
// know, versionMore, checksums learned after the look-up) stay whole
// (pkFat).

// Flags of a packed entry, in its header.
const (
	// pkPending: entry.pending (a write's hold on negative caching); no body.
	pkPending = 1 << iota
	// pkFat: the entry is not packed: the cache slot holds it whole.
	pkFat
	// Of an entry with a body: entry.viaUpstream, shared, incomplete,
	// isDir, a checksum in entry.sums.
	pkViaUpstream
	pkShared
	pkIncomplete
	pkIsDir
	pkSums
	// pkAnswersFound: the answers are one ansFound per replica, in
	// order, and none other (every endpoint asked had the file).
	pkAnswersFound
)

// pkKeyAt is where the path's length starts.
const pkKeyAt = 9

// Flags of a packed replica; the usual ones fit the first byte of the
// uvarint.
const (
	prDerived = 1 << iota
	prMod
	// prModSec: the modification time is whole seconds (Last-Modified),
	// kept as seconds after the previous replica's.
	prModSec
	prStrong
	prETag
	prIsDir
	prLoc
	prOwnSize // its size differs from the entry's
	prBorn
	prSums
	// prEntrySums: its checksums are the entry's (entry.sums), as when
	// every site reports the same: kept once, and unpacked as one map.
	prEntrySums
)

func packedExpires(d string) int64 { return int64(le64At(d, 0)) }

// le64At reads the little-endian uint64 at s[i:].
func le64At(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func packedFlags(d string) byte { return d[8] }

// packedKey is the path a packed entry is for.
func packedKey(d string) string {
	n, i := uvarintAt(d, pkKeyAt)
	return d[i : i+int(n)]
}

// packHeader appends the header of an entry for key.
func packHeader(b []byte, key string, expires int64, flags byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(expires))
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(b, key...)
}

// pack returns e packed for key, and whether it is fat (the slot must
// hold e itself).
func (c *mdCache) pack(key string, e *entry) (d string, fat bool) {
	b := make([]byte, 0, 128)
	switch {
	case e.pending:
		b = packHeader(b, key, e.expires, pkPending)
	case e.status == http.StatusOK:
		b = packHeader(b, key, e.expires, 0)
		var ok bool
		if b, ok = c.packEntry(b, key, e); ok {
			break
		}
		fallthrough
	default:
		fat = true
		b = packHeader(b[:0], key, e.expires, pkFat)
	}
	// A copy of exactly its length: the spare room of b would stay in
	// the cache with the entry.
	return string(b), fat
}

// packEntry appends the body of e, an entry for key, to b; ok false when
// e holds what a body cannot.
func (c *mdCache) packEntry(b []byte, key string, e *entry) (_ []byte, ok bool) {
	var flags byte
	for _, x := range []struct {
		set  bool
		flag byte
	}{{e.viaUpstream, pkViaUpstream}, {e.shared, pkShared}, {e.incomplete, pkIncomplete}, {e.isDir, pkIsDir}} {
		if x.set {
			flags |= x.flag
		}
	}
	var sums map[string]string
	if p := e.sums.Load(); p != nil {
		sums = *p
		flags |= pkSums
	}
	found := len(e.answers) == len(e.replicas)
	for i, a := range e.answers {
		found = found && a.kind == ansFound && a.m == e.replicas[i].m
	}
	if found {
		flags |= pkAnswersFound
	}
	b[8] |= flags
	b = binary.AppendUvarint(b, uint64(len(e.replicas)))
	if e.incomplete {
		b = binary.AppendUvarint(b, e.epoch)
	}
	b = binary.AppendVarint(b, e.size)
	if sums != nil {
		b = packSums(b, sums)
	}
	if !found {
		b = binary.AppendUvarint(b, uint64(len(e.answers)))
		for _, a := range e.answers {
			i, known := c.memberIdx[a.m]
			if !known {
				return b, false
			}
			// The answers of a 200 entry are read for their endpoint
			// and kind only (unanswered, deleteReport, the debug
			// header): their error and time fill 404 and 503 bodies.
			b = binary.AppendUvarint(b, uint64(i))
			b = append(b, byte(a.kind))
		}
	}
	var prevSec int64
	for i, r := range e.replicas {
		mi, known := c.memberIdx[r.m]
		if !known || r.ver.more != nil || int(r.idx) != min(i, 255) || r.path != r.m.endpointPath(key) {
			return b, false
		}
		if r.learned != nil && r.learned.p.Load() != nil {
			return b, false
		}
		v := &r.ver
		var rf uint16
		for _, x := range []struct {
			set  bool
			flag uint16
		}{
			{r.derived, prDerived}, {!r.derived && r.loc[0] != "", prLoc}, {v.hasMod, prMod},
			{v.isDir, prIsDir}, {v.strong, prStrong}, {v.etag != "", prETag}, {v.size != e.size, prOwnSize},
			// The time a URL was made matters only for one that expires
			// (refreshURLs).
			{r.m.presign != 0 && r.born != 0, prBorn}, {len(v.sums) > 0 && !maps.Equal(v.sums, sums), prSums},
			{len(v.sums) > 0 && maps.Equal(v.sums, sums), prEntrySums},
			{v.hasMod && v.mod%1e9 == 0, prModSec},
		} {
			if x.set {
				rf |= x.flag
			}
		}
		b = binary.AppendUvarint(b, uint64(mi))
		b = binary.AppendUvarint(b, uint64(rf))
		if rf&prOwnSize != 0 {
			b = binary.AppendVarint(b, v.size)
		}
		switch {
		case rf&prModSec != 0:
			b = binary.AppendVarint(b, v.mod/1e9-prevSec)
			prevSec = v.mod / 1e9
		case v.hasMod:
			b = binary.LittleEndian.AppendUint64(b, uint64(v.mod))
		}
		if v.etag != "" {
			b = packETag(b, v.etag[1:len(v.etag)-1], v)
		}
		if rf&prLoc != 0 {
			b = packString(b, r.loc[0])
		}
		if rf&prBorn != 0 {
			b = binary.AppendVarint(b, r.born)
		}
		if rf&prSums != 0 {
			b = packSums(b, v.sums)
		}
	}
	return b, true
}

// unpack makes the entry d describes, as the look-up that c packed it
// from made it (its answers' errors and times left out, see packEntry),
// or nil when d is not a packed entry with a body.
func (c *mdCache) unpack(d string) *entry {
	flags := packedFlags(d)
	if flags&(pkPending|pkFat) != 0 {
		return nil
	}
	key := packedKey(d)
	u := unpacker{d: d, i: pkKeyAt}
	u.i = u.uvarintEnd() + len(key)
	n := int(u.uvarint())
	var e *entry
	var reps []replica
	var learned []learnedSums
	if n <= len(entryOf3{}.reps) {
		// One allocation rather than five, for most entries.
		b := new(entryOf3)
		e, reps, learned = &b.e, b.reps[:n:n], b.learned[:n:n]
		e.replicas, e.answers = b.ptrs[:n:n], b.answers[:n:n]
	} else {
		e, reps, learned = new(entry), make([]replica, n), make([]learnedSums, n)
		e.replicas, e.answers = make([]*replica, n), make([]answer, n)
	}
	if n == 0 {
		e.replicas, e.answers = nil, nil
	}
	e.expires, e.status = packedExpires(d), http.StatusOK
	e.viaUpstream, e.shared, e.incomplete, e.isDir = flags&pkViaUpstream != 0, flags&pkShared != 0, flags&pkIncomplete != 0, flags&pkIsDir != 0
	if e.incomplete {
		e.epoch = u.uvarint()
	}
	e.size = u.varint()
	var sums map[string]string
	if flags&pkSums != 0 {
		sums = u.sums()
		e.sums.Store(&sums)
	}
	if flags&pkAnswersFound == 0 {
		e.answers = make([]answer, u.uvarint())
		for i := range e.answers {
			m := c.member(u.uvarint())
			e.answers[i] = answer{m: m, kind: answerKind(u.byte())}
		}
	}
	var prevSec int64
	// The replicas' tags, made in one string: tags holds them, ends
	// where each ends (0: no tag).
	var tagBuf [256]byte
	var endBuf [8]int
	tags, ends := tagBuf[:0], endBuf[:]
	if n > len(endBuf) {
		ends = make([]int, n)
	}
	for i := range reps {
		r := &reps[i]
		r.m = c.member(u.uvarint())
		rf := u.uvarint()
		r.path = r.m.endpointPath(key)
		r.idx = uint8(min(i, 255))
		learned[i].e = e
		r.learned = &learned[i]
		r.derived = rf&prDerived != 0
		v := &r.ver
		v.size, v.hasMod, v.isDir, v.strong = e.size, rf&prMod != 0, rf&prIsDir != 0, rf&prStrong != 0
		if rf&prOwnSize != 0 {
			v.size = u.varint()
		}
		switch {
		case rf&prModSec != 0:
			prevSec += u.varint()
			v.mod = prevSec * 1e9
		case v.hasMod:
			v.mod = int64(le64At(d, u.i))
			u.i += 8
		}
		if rf&prETag != 0 {
			tags = u.appendETag(tags, v)
			ends[i] = len(tags)
		}
		if rf&prLoc != 0 {
			r.loc[0] = u.string()
		}
		if rf&prBorn != 0 {
			r.born = u.varint()
		}
		switch {
		case rf&prSums != 0:
			v.sums = u.sums()
		case rf&prEntrySums != 0:
			// Shared: a version's checksums are never written to.
			v.sums = sums
		}
		e.replicas[i] = r
	}
	if len(tags) > 0 {
		all, start := string(tags), 0
		for i, end := range ends {
			if end > 0 {
				reps[i].ver.etag, start = all[start:end], end
			}
		}
	}
	if flags&pkAnswersFound != 0 {
		for i, r := range e.replicas {
			e.answers[i] = answer{m: r.m, kind: ansFound}
		}
	}
	e.setHeaders()
	return e
}

// entryOf3 is an unpacked entry of up to three replicas, with them.
type entryOf3 struct {
	e       entry
	reps    [3]replica
	learned [3]learnedSums
	ptrs    [3]*replica
	answers [3]answer
}

// member is the member of index i; a packed entry names only members the
// cache knows (packEntry).
func (c *mdCache) member(i uint64) *member { return c.members[i] }

func packString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func packSums(b []byte, sums map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(sums)))
	for k, v := range sums {
		b = packString(b, k)
		b = packString(b, v)
	}
	return b
}

// unpacker reads the body of a packed entry.
type unpacker struct {
	d string
	i int
}

func (u *unpacker) byte() byte {
	c := u.d[u.i]
	u.i++
	return c
}

func (u *unpacker) uvarint() uint64 {
	v, i := uvarintAt(u.d, u.i)
	u.i = i
	return v
}

// uvarintEnd skips a uvarint and returns where it ends.
func (u *unpacker) uvarintEnd() int {
	_, i := uvarintAt(u.d, u.i)
	return i
}

func (u *unpacker) varint() int64 { return unzigzag(u.uvarint()) }

// unzigzag is the varint whose uvarint form is x (binary.AppendVarint).
func unzigzag(x uint64) int64 {
	v := int64(x >> 1)
	if x&1 != 0 {
		v = ^v
	}
	return v
}

// string returns the next string, a part of the packed entry.
func (u *unpacker) string() string {
	n := int(u.uvarint())
	s := u.d[u.i : u.i+n]
	u.i += n
	return s
}

func (u *unpacker) sums() map[string]string {
	n := int(u.uvarint())
	m := make(map[string]string, n)
	for range n {
		k := u.string()
		m[k] = u.string()
	}
	return m
}

// uvarintAt decodes the uvarint at s[i:] and returns it and where it
// ends.
func uvarintAt(s string, i int) (uint64, int) {
	var x uint64
	for shift := uint(0); ; shift += 7 {
		c := s[i]
		i++
		if c < 0x80 {
			return x | uint64(c)<<shift, i
		}
		x |= uint64(c&0x7f) << shift
	}
}

// Tokens of a packed entity tag. A tag is visible ASCII and obs-text
// (RFC 9110 §8.8.3, etagc), so bytes below 0x20 are free for them.
const (
	// tokModNS: the modification time in unix ns, in hex (lakefed's
	// storage role).
	tokModNS = 1 + iota
	// tokModS: the modification time in unix seconds, in hex (nginx,
	// Apache's default).
	tokModS
	// tokSize: the size in hex (both).
	tokSize
	// tokNum, uvarint v: v in hex, no leading zeros (an inode).
	tokNum
	// tokNear, varint d: the previous tokNear's number (at first the
	// modification time in ns) plus d, in hex, no leading zeros: a
	// modification time in ns when the version has it to the second
	// (Last-Modified), and a change time, close to that.
	tokNear
	// tokHex, n, then n digits two a byte: n lower-case hex digits (a
	// digest).
	tokHex
	// tokByte, c: the byte c, itself below 0x20 (not a valid tag).
	tokByte
)

// packETag appends the entity tag t of the version v, uvarint length
// first. Most servers make their tags of numbers the version already
// holds (modification time, size), which are written as one byte each,
// and of hex numbers and digests, written as bytes: lakefed's storage
// role's 42-byte tags take 10 or so, nginx's 3. Anything else is kept
// as it is.
func packETag(b []byte, t string, v *version) []byte {
	var modNS, modS string
	if v.hasMod {
		modNS = strconv.FormatInt(v.mod, 16)
		modS = strconv.FormatInt(time.Unix(0, v.mod).Unix(), 16)
	}
	size := strconv.FormatInt(v.size, 16)
	prev := v.mod
	var buf [64]byte
	p := buf[:0]
	for i := 0; i < len(t); {
		j := i
		for j < len(t) && isLowerHex(t[j]) {
			j++
		}
		if j == i {
			if t[i] < 0x20 {
				p = append(p, tokByte)
			}
			p = append(p, t[i])
			i++
			continue
		}
		run := t[i:j]
		// The longest of the version's own numbers that starts the run.
		tok, n := byte(0), 0
		for _, x := range []struct {
			tok byte
			s   string
		}{{tokModNS, modNS}, {tokModS, modS}, {tokSize, size}} {
			if x.s != "" && len(x.s) > n && strings.HasPrefix(run, x.s) {
				tok, n = x.tok, len(x.s)
			}
		}
		if tok != 0 {
			p = append(p, tok)
			i += n
			continue
		}
		if run[0] != '0' || len(run) == 1 {
			// A number of up to 15 digits (60 bits), or the first 16
			// digits of a longer run when they are near the previous
			// number (a time in ns followed by the size).
			n := min(len(run), 16)
			x, _ := strconv.ParseUint(run[:n], 16, 64)
			if d := int64(x) - prev; x <= math.MaxInt64 && d > -1<<40 && d < 1<<40 {
				p = binary.AppendVarint(append(p, tokNear), d)
				prev, i = int64(x), i+n
				continue
			}
			if n <= 15 {
				p = binary.AppendUvarint(append(p, tokNum), x)
				i += n
				continue
			}
		}
		run = run[:min(len(run), 255)]
		p = append(p, tokHex, byte(len(run)))
		for k := 0; k < len(run); k += 2 {
			hi, lo := unhex(run[k]), byte(0)
			if k+1 < len(run) {
				lo = unhex(run[k+1])
			}
			p = append(p, hi<<4|lo)
		}
		i += len(run)
	}
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// etag reads a tag packETag wrote for v, and returns it quoted, as
// version.etag keeps it.
func (u *unpacker) etag(v *version) string { return string(u.appendETag(nil, v)) }

// appendETag appends to t the tag packETag wrote for v, quoted.
func (u *unpacker) appendETag(t []byte, v *version) []byte {
	p := u.string()
	prev := v.mod
	t = append(t, '"')
	for k := 0; k < len(p); {
		c := p[k]
		k++
		switch c {
		case tokModNS:
			t = strconv.AppendInt(t, v.mod, 16)
		case tokModS:
			t = strconv.AppendInt(t, time.Unix(0, v.mod).Unix(), 16)
		case tokSize:
			t = strconv.AppendInt(t, v.size, 16)
		case tokNum:
			x, n := uvarintAt(p, k)
			t, k = strconv.AppendUint(t, x, 16), n
		case tokNear:
			x, n := uvarintAt(p, k)
			prev += unzigzag(x)
			t, k = strconv.AppendInt(t, prev, 16), n
		case tokHex:
			n := int(p[k])
			k++
			for i := range n {
				c := p[k+i/2]
				if i%2 == 0 {
					c >>= 4
				}
				t = append(t, "0123456789abcdef"[c&0xf])
			}
			k += (n + 1) / 2
		case tokByte:
			t = append(t, p[k])
			k++
		default:
			t = append(t, c)
		}
	}
	return append(t, '"')
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}
