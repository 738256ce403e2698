package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// On disk, a cached file is two files under Dir/data/<2 hex>/: the data
// file, sparse, holding the blocks at their offsets, and the block map
// beside it:
//
//	magic "LFC1" | header length (uint32 LE) | header (JSON) | records
//
// The header says which version of which origin file the blocks are of;
// each record (8 bytes: block index and CRC-32C, LE) says one block is
// present and what its bytes sum to. A block's record is appended only
// after its bytes were written, and a block is served from disk only
// after its bytes were read back and their CRC-32C matched the record;
// so neither a crash between the two writes nor a block that rots on
// disk (issues 975 and 1701 of xrootd: XCache serving zeros) can put
// wrong bytes on the wire: the block is fetched again. No fsync is
// needed for that (a lost write is a mismatch). The readers a fill
// fetched a block for are served the fill's own buffer, once the
// block is recorded: those bytes never left memory.
const (
	metaMagic = "LFC1"
	recSize   = 8
	// recVerified is the index of the record that says the whole file
	// was checked against the origin's adler32.
	recVerified = ^uint32(0)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the JSON header of a block map.
type header struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ETag    string `json:"etag,omitempty"`
	ModTime int64  `json:"mtime,omitempty"` // unix ns
	// Strong: the origin's version names the bytes (endpoint.Info.Strong).
	// When not, a read of the origin is joined to the blocks on disk only
	// once proven of the same bytes (Cache.prove). A block map written
	// without it is weak: the cautious reading.
	Strong  bool   `json:"strong,omitempty"`
	Block   int64  `json:"block"`
	Adler32 string `json:"adler32,omitempty"` // the origin's, when it gave one
}

// version is the origin's description of the file the blocks are of.
func (h header) version() endpoint.Info {
	in := endpoint.Info{Size: h.Size, ETag: h.ETag, Strong: h.Strong}
	if h.ModTime != 0 {
		in.ModTime = time.Unix(0, h.ModTime)
	}
	return in
}

// keyOf names a path's files: the SHA-256 of the path, so any path maps
// to a fixed-length name, spread over 256 directories.
func keyOf(p string) string {
	sum := sha256.Sum256([]byte(p))
	return hex.EncodeToString(sum[:16])
}

// file is one cached origin file: its version and which of its blocks
// are on disk. Its methods are safe for concurrent use.
type file struct {
	path string
	key  string
	base string // Dir/data/xx/key, without the extension

	mu sync.Mutex // guards what follows
	// epoch changes when the blocks are dropped (a new version, a purge):
	// a fill of an older epoch writes into an unlinked inode and marks
	// nothing. Epochs come from one counter of the cache (Cache.epochs),
	// so no two versions of a path, in this entry or in one made after
	// it was dropped, share one: the RAM blocks are keyed by it.
	epoch   uint64
	hdr     header
	known   bool      // hdr describes an origin version (else: never looked up)
	checked time.Time // when the origin last confirmed hdr
	crcs    []uint32
	have    []bool
	// adlers are the blocks' adler32 when this run filled them (adlerOK),
	// combined into the file's to verify it without reading it back.
	adlers  []uint32
	adlerOK []bool
	present int64 // blocks present
	bytes   int64 // bytes of the blocks present
	// filling maps a block being fetched to its slot, whose channel is
	// closed when the fetch ends (present or failed).
	filling map[int64]*slot
	// prefetched marks blocks fetched ahead of any reader, until read.
	prefetched map[int64]bool
	fillErr    error // why the last fill that failed did
	verified   bool  // the whole file matched the origin's adler32
	verifying  bool
	// pins counts the requests reading the file: a purge leaves it.
	pins    int
	lastUse time.Time
	gone    bool // dropped from the index: a new request makes a new file
	meta    *os.File
	pattern pattern
}

func newFile(dir, p string) *file {
	k := keyOf(p)
	return &file{
		path: p, key: k,
		base:       filepath.Join(dir, "data", k[:2], k),
		filling:    map[int64]*slot{},
		prefetched: map[int64]bool{},
		lastUse:    time.Now(),
	}
}

func (f *file) dataPath() string { return f.base + ".data" }
func (f *file) metaPath() string { return f.base + ".meta" }

// blocks is how many blocks a file of the header's size has.
func (h header) blocks() int64 {
	if h.Size == 0 {
		return 0
	}
	return (h.Size + h.Block - 1) / h.Block
}

// blockLen is the length of block i.
func (h header) blockLen(i int64) int64 {
	return min(h.Block, h.Size-i*h.Block)
}

// resetLocked drops every block and starts the files afresh for the
// version hdr: a new data file (new inode) and a block map holding only
// the header. Fills of the old epoch go on into the unlinked old inode.
func (f *file) resetLocked(hdr header, epoch uint64) error {
	f.epoch = epoch
	f.closeMetaLocked()
	_ = os.Remove(f.dataPath())
	_ = os.Remove(f.metaPath())
	f.hdr, f.known = hdr, true
	n := hdr.blocks()
	f.crcs, f.have = make([]uint32, n), make([]bool, n)
	f.adlers, f.adlerOK = make([]uint32, n), make([]bool, n)
	f.present, f.bytes, f.verified, f.fillErr = 0, 0, false, nil
	clear(f.prefetched)
	clear(f.filling) // the old epoch's fills close their own channels
	if err := os.MkdirAll(filepath.Dir(f.base), 0o755); err != nil {
		return err
	}
	d, err := os.OpenFile(f.dataPath(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := d.Truncate(hdr.Size); err != nil { // sparse: holes until filled
		d.Close()
		_ = os.Remove(f.dataPath())
		return err
	}
	d.Close()
	hj, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString(metaMagic)
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(hj)))
	b.Write(hj)
	// A disk that fills here leaves neither file behind: nothing would
	// hold them until the next start.
	tmp := f.metaPath() + ".tmp"
	err = os.WriteFile(tmp, b.Bytes(), 0o644)
	if err == nil {
		err = os.Rename(tmp, f.metaPath())
	}
	if err != nil {
		_ = os.Remove(tmp)
		_ = os.Remove(f.dataPath())
	}
	return err
}

// appendLocked records block i (or the verified mark) in the block map.
func (f *file) appendLocked(i uint32, crc uint32) error {
	if f.meta == nil {
		m, err := os.OpenFile(f.metaPath(), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		f.meta = m
	}
	var rec [recSize]byte
	binary.LittleEndian.PutUint32(rec[:4], i)
	binary.LittleEndian.PutUint32(rec[4:], crc)
	_, err := f.meta.Write(rec[:])
	return err
}

func (f *file) closeMetaLocked() {
	if f.meta != nil {
		f.meta.Close()
		f.meta = nil
	}
}

// errBadMeta is a block map that cannot be read; the file is dropped.
var errBadMeta = errors.New("cache: bad block map")

// load reads a block map written by an earlier run. A trailing partial
// record (a crash mid-append) is ignored; the bytes of every block are
// checked when read anyway.
func load(dir, metaPath string) (*file, error) {
	raw, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, err
	}
	if len(raw) < 8 || string(raw[:4]) != metaMagic {
		return nil, errBadMeta
	}
	hl := int(binary.LittleEndian.Uint32(raw[4:8]))
	if hl > len(raw)-8 {
		return nil, errBadMeta
	}
	var hdr header
	if err := json.Unmarshal(raw[8:8+hl], &hdr); err != nil || hdr.Block <= 0 || hdr.Size < 0 || hdr.Path == "" {
		return nil, errBadMeta
	}
	f := newFile(dir, hdr.Path)
	if f.metaPath() != metaPath {
		return nil, fmt.Errorf("%w: %s holds the map of %s", errBadMeta, metaPath, hdr.Path)
	}
	st, err := os.Stat(f.dataPath())
	if err != nil || st.Size() != hdr.Size {
		return nil, fmt.Errorf("%w: data file missing or of the wrong size", errBadMeta)
	}
	f.hdr, f.known = hdr, true
	n := hdr.blocks()
	f.crcs, f.have = make([]uint32, n), make([]bool, n)
	f.adlers, f.adlerOK = make([]uint32, n), make([]bool, n)
	for recs := raw[8+hl:]; len(recs) >= recSize; recs = recs[recSize:] {
		i, crc := binary.LittleEndian.Uint32(recs[:4]), binary.LittleEndian.Uint32(recs[4:8])
		switch {
		case i == recVerified:
			f.verified = true
		case int64(i) < n:
			// The last record of a block wins: a block found corrupt
			// and fetched again has a second one.
			if !f.have[i] {
				f.have[i] = true
				f.present++
				f.bytes += hdr.blockLen(int64(i))
			}
			f.crcs[i] = crc
		}
	}
	if mt, err := os.Stat(metaPath); err == nil {
		f.lastUse = mt.ModTime()
	}
	return f, nil
}

// readBlock reads block i of the epoch's data file into buf and checks it
// against its CRC-32C. ok is false on a mismatch.
func readBlock(d *os.File, hdr header, i int64, want uint32, buf []byte) (b []byte, ok bool, err error) {
	b = buf[:hdr.blockLen(i)]
	if _, err := d.ReadAt(b, i*hdr.Block); err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	return b, crc32.Checksum(b, castagnoli) == want, nil
}
