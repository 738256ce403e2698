package cache

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"runtime/debug"

	"github.com/lakefed/lakefed/internal/httpx"
)

// A warm block goes to a plain-HTTP client with sendfile(2), checked
// where it lies, never copied into the process:
//
//  1. the reader maps its data file once, read-only and shared (mapping);
//  2. mlock(2) pins the block's pages: from then on the page cache holds
//     those very pages, which can be neither evicted nor read again from
//     the disk (where the bytes may have rotted since);
//  3. the CRC-32C recorded at fill time is compared over the mapped
//     bytes (no copy: CRC-32C runs at about 27 GB/s here);
//  4. sendfile sends the range from the page cache, that is from the
//     pinned pages just checked (net/http's ReadFrom, httpx.SendFileRange:
//     the storage role's own way of sending a file);
//  5. munlock. A TCP segment still holds a reference on each page it
//     carries, so the bytes sent cannot change after the unpin either.
//
// So the rule of the copying path holds: a block whose bytes do not match
// their CRC-32C is never served, it is counted and fetched again. The
// copying path (readBlock: pread into a buffer, check, write) costs two
// copies of every byte, and the process's memory bandwidth on 2 cores.
//
// What can touch the pages meanwhile. A fill never writes a block that is
// present (it writes one that was found corrupt, and with the bytes of the
// same version); fills of other blocks touch other pages. A new version
// or a purge removes the data file, never truncates it: the reader's open
// file and mapping keep the old inode whole (resetLocked, Cache.remove).
// Only a hand that truncates the file under the cache could make a
// mapped page vanish; the check runs with SetPanicOnFault so that such a
// fault fails the read rather than the process, and sendfile then falls
// short (the answer is aborted).
//
// It is asked for (Config.Sendfile), not the default: to a client on the
// same host it is the slower path. BenchmarkWarmRead (64 MiB over
// loopback, 2 shared cores) measured it at about 0.6× the copying path,
// and sendfile alone, with no pin and no check, at about 0.7×: the
// loopback's receive side costs more with page-cache pages than with the
// socket's own buffers, and the CRC-32C over mapped pages runs at about
// 6 GB/s (perf: a TLB miss every 4 KiB, nested paging in a VM) against
// 22 GB/s over a buffer pread has just filled. Across a network card the
// two copies it saves are the process's main cost.
//
// Where the block cannot be pinned (RLIMIT_MEMLOCK reached, a file
// system that will not map), or the writer cannot take sendfile (TLS,
// HTTP/2, a multipart part, the root:// door's buffers), the block takes
// the copying path. Partial reads of a block do too while a RAM cache is
// configured: they are the small reads that come back, which RAM serves.

// errNoZeroCopy: this block takes the copying path.
var errNoZeroCopy = errors.New("cache: block not sent from the page cache")

// errFault: a mapped page vanished under the check (the data file was
// cut short behind the cache's back).
var errFault = errors.New("cache: data file changed under its mapping")

// sendfileTo reports whether the answer to r goes out on a plain TCP
// connection, where net/http turns a file body into sendfile(2).
func sendfileTo(r *http.Request) bool {
	if r.TLS != nil || r.ProtoMajor != 1 {
		return false
	}
	_, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return ok
}

// zeroCopy reports whether block i goes to w by sendBlock.
func (rd *rangeReader) zeroCopy(w io.Writer, i int64, whole bool) bool {
	if !rd.zc || rd.held[i] != nil || (!whole && rd.c.ram != nil) {
		return false
	}
	_, ok := w.(io.ReaderFrom)
	return ok
}

// sendBlock sends bytes [lo, hi) of block i, on disk, to w with sendfile,
// pinned and checked as the comment above says. It returns errCorrupt
// (the block forgotten, to be fetched again) or errNoZeroCopy having
// written nothing.
func (rd *rangeReader) sendBlock(w io.Writer, i, lo, hi int64) error {
	crc, err := rd.recorded(i)
	if err != nil {
		return err
	}
	m := rd.mapped()
	if m == nil {
		return errNoZeroCopy
	}
	off, n := i*rd.hdr.Block, rd.hdr.blockLen(i)
	b, err := m.pin(off, n)
	if err != nil {
		rd.c.m.zeroCopyFallbacks.Inc()
		return errNoZeroCopy
	}
	defer m.unpin(b)
	sum, err := sumMapped(b)
	if err != nil {
		return fmt.Errorf("cache: %s: block %d: %w", rd.f.path, i, err)
	}
	rd.c.m.diskReadBytes.Add(float64(n))
	if sum != crc {
		rd.c.corrupt(rd.f, rd.epoch, i)
		return errCorrupt
	}
	if err := httpx.SendFileRange(w, rd.d, httpx.Range{Start: off + lo, Length: hi - lo}); err != nil {
		return err
	}
	rd.c.m.zeroCopyBytes.Add(float64(hi - lo))
	return nil
}

// mapped is the reader's mapping of its data file, made at the first
// block it sends; nil when the file cannot be mapped.
func (rd *rangeReader) mapped() *mapping {
	if rd.m == nil && !rd.noMap {
		m, err := mapFile(rd.d, rd.hdr.Size)
		if err != nil {
			rd.noMap = true
			rd.c.m.zeroCopyFallbacks.Inc()
			return nil
		}
		rd.m = m
	}
	return rd.m
}

// sumMapped is the CRC-32C of mapped bytes, with a fault (a page gone:
// SIGBUS) turned into errFault.
func sumMapped(b []byte) (sum uint32, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = errFault
		}
	}()
	return crc32.Checksum(b, castagnoli), nil
}
