package cache_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/cache"
)

// Warm blocks go out with sendfile, whole or in part, the last (short)
// block included; a multi-range answer, whose parts cannot take
// sendfile, is copied and still right.
func TestWarmBlocksSentWithSendfile(t *testing.T) {
	o := startOrigin(t)
	data := random(4*block+123, 71)
	o.write(t, "f", data)
	n := startCache(t, cache.Config{BlockSize: block, RAM: -1, Sendfile: true}, o.ep)
	if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
		t.Fatal("first read differs")
	}
	zc := func() int64 { return metric(t, n.URL+"/metrics", "lakefed_cache_zero_copy_bytes_total") }
	base := zc()
	if resp, b := get(t, n.URL+"/f"); resp.StatusCode != 200 || !bytes.Equal(b, data) {
		t.Fatalf("warm read = %d, identical %v", resp.StatusCode, bytes.Equal(b, data))
	}
	if d := zc() - base; d != int64(len(data)) {
		t.Errorf("warm read: %d bytes sent with sendfile, want all %d", d, len(data))
	}
	lo, hi := block+10, 3*block+20
	base = zc()
	resp, b := get(t, n.URL+"/f", "Range", fmt.Sprintf("bytes=%d-%d", lo, hi))
	if resp.StatusCode != 206 || !bytes.Equal(b, data[lo:hi+1]) {
		t.Fatalf("warm range = %d, identical %v", resp.StatusCode, bytes.Equal(b, data[lo:hi+1]))
	}
	if d := zc() - base; d != int64(hi+1-lo) {
		t.Errorf("warm range: %d bytes sent with sendfile, want %d", d, hi+1-lo)
	}
	base = zc()
	resp, b = get(t, n.URL+"/f", "Range", "bytes=0-9,200000-200009")
	if resp.StatusCode != 206 || !bytes.Contains(b, data[:10]) || !bytes.Contains(b, data[200000:200010]) {
		t.Fatalf("warm multi-range = %d, parts missing", resp.StatusCode)
	}
	if d := zc() - base; d != 0 {
		t.Errorf("multi-range: %d bytes sent with sendfile, want 0 (copied)", d)
	}
}

// A block served once, then corrupted on disk, is refused on the next
// read and fetched again: sent with sendfile or copied (and read ahead),
// whether the page cache holds the rotten bytes or the pages were evicted
// (posix_fadvise(DONTNEED)) and are read again from the disk.
func TestCorruptAfterWarmReadNeverServed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sendfile bool
		evict    bool
	}{
		{"copied, in the page cache", false, false},
		{"copied, evicted", false, true},
		{"sendfile, in the page cache", true, false},
		{"sendfile, evicted", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := startOrigin(t)
			data := random(4*block, 72)
			o.write(t, "f", data)
			dir := t.TempDir()
			n := startCache(t, cache.Config{Dir: dir, BlockSize: block, RAM: -1, Sendfile: tc.sendfile}, o.ep)
			for range 2 {
				if _, b := get(t, n.URL+"/f"); !bytes.Equal(b, data) {
					t.Fatal("read before the corruption differs")
				}
			}
			waitVerified(t, n, "/f")
			// The warm read took the path under test.
			series, want := "lakefed_cache_read_ahead_bytes_total", int64(len(data)-block)
			if tc.sendfile {
				series, want = "lakefed_cache_zero_copy_bytes_total", int64(len(data))
			}
			if got := metric(t, n.URL+"/metrics", series); got != want {
				t.Fatalf("%s = %d, want %d", series, got, want)
			}
			rot(t, dataFileIn(t, dir), 2*block+7, tc.evict)
			healsOneBlock(t, n, o, data)
		})
	}
}

// rot overwrites bytes of a data file at off; evict writes them to the
// disk and drops the file's pages from the page cache, so the next read
// finds the rotten bytes on the disk.
func rot(t *testing.T, path string, off int64, evict bool) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(bytes.Repeat([]byte{0x5a}, 100), off); err != nil {
		t.Fatal(err)
	}
	if !evict {
		return
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(fh.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if resident(t, path) {
		t.Fatal("the data file's pages are still in the page cache after FADV_DONTNEED")
	}
}

// resident reports whether any page of the file is in the page cache
// (mincore(2) over a mapping of it).
func resident(t *testing.T, path string) bool {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(fh.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	pages := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&pages[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, p := range pages {
		if p&1 != 0 {
			return true
		}
	}
	return false
}

// BenchmarkWarmRead reads a warm 64 MiB file through the cache over
// loopback: sent from the page cache (sendfile), and, as the reference
// in the same run, copied (a writer that hides ReadFrom takes the
// copying path, as TLS does).
func BenchmarkWarmRead(b *testing.B) {
	o := startOrigin(b)
	data := random(64<<20, 73)
	o.write(b, "f", data)
	c, err := cache.New(b.Context(), cache.Config{Dir: b.TempDir(), RAM: -1, Sendfile: true}, o.ep, cache.Options{Log: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{
		{"sendfile", c.Handler()},
		{"copy", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.Handler().ServeHTTP(struct{ http.ResponseWriter }{w}, r)
		})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			if _, got := get(b, srv.URL+"/f"); !bytes.Equal(got, data) {
				b.Fatal("read differs")
			}
			b.Run("go", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					resp, err := http.Get(srv.URL + "/f")
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || n != int64(len(data)) {
						b.Fatalf("read %d bytes, %v", n, err)
					}
				}
			})
			// curl, the client of bench/cache.sh, in a process of its
			// own as it is there.
			b.Run("curl", func(b *testing.B) {
				curl, err := exec.LookPath("curl")
				if err != nil {
					b.Skip("no curl on PATH")
				}
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if out, err := exec.Command(curl, "-sf", "-o", "/dev/null", srv.URL+"/f").CombinedOutput(); err != nil {
						b.Fatalf("curl: %v %s", err, out)
					}
				}
			})
		})
	}
}
