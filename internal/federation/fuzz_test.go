package federation

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/lakefed/lakefed/internal/httpx"
)

// FuzzProxyRange sends any Range (and If-Range) to a proxied file and
// checks what comes back against the file: never a 5xx; a 200 is the
// whole file; a 206 is the bytes its Content-Range names, or a multipart
// whose every part is; a 416 names the size; and no answer is much bigger
// than the file (range amplification). make test runs it for a bounded
// time (FUZZTIME).
func FuzzProxyRange(f *testing.F) {
	for _, seed := range []string{
		"bytes=0-9", "bytes=-10", "bytes=10-", "bytes=0-0,5-5,-1", "bytes=-0", "bytes=0-,0-,0-",
		"bytes=99999-", "bytes=5-1", "bytes=", "bytes=1-2,3-4,5-6,7-8", "items=0-1", "bytes=0-18446744073709551616",
		"bytes=" + strings.Repeat("1-1,", 200), " bytes = 0 - 5 ", "bytes=-9223372036854775808",
	} {
		f.Add(seed, "")
	}
	f.Add("bytes=0-9", `"zzz"`)
	data := randData(4096, 40)
	a := newFake("ra", false)
	a.put("/f", data)
	tf := startFed(f, cfgYAML("mode: proxy\n"+slowHealth, ep("ra")), a)
	h := tf.Handler()
	size := int64(len(data))
	f.Fuzz(func(t *testing.T, rng, ifRange string) {
		req := httptest.NewRequest("GET", "/f", nil)
		req.Header.Set("Range", rng)
		if ifRange != "" {
			req.Header.Set("If-Range", ifRange)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		if len(body) > 2*len(data)+64*1024 {
			t.Fatalf("Range %q: %d bytes for a %d-byte file", rng, len(body), len(data))
		}
		switch rec.Code {
		case 200:
			if !bytes.Equal(body, data) {
				t.Fatalf("Range %q: 200 with %d bytes, not the file", rng, len(body))
			}
		case 206:
			ct := rec.Header().Get("Content-Type")
			if strings.HasPrefix(ct, "multipart/byteranges") {
				_, params, err := mime.ParseMediaType(ct)
				if err != nil {
					t.Fatalf("Range %q: bad multipart type %q", rng, ct)
				}
				mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
				for {
					part, err := mr.NextPart()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("Range %q: multipart: %v", rng, err)
					}
					got, _ := io.ReadAll(part)
					checkPart(t, rng, part.Header.Get("Content-Range"), got, data)
				}
				return
			}
			checkPart(t, rng, rec.Header().Get("Content-Range"), body, data)
		case 416:
			if rec.Header().Get("Content-Range") != "bytes */"+strconv.FormatInt(size, 10) {
				t.Fatalf("Range %q: 416 with Content-Range %q", rng, rec.Header().Get("Content-Range"))
			}
		default:
			t.Fatalf("Range %q If-Range %q: status %d", rng, ifRange, rec.Code)
		}
	})
}

func checkPart(t *testing.T, rng, cr string, got, data []byte) {
	t.Helper()
	first, last, total, ok := httpx.ParseContentRange(cr)
	if !ok || total != int64(len(data)) || first < 0 || last < first || last >= total {
		t.Fatalf("Range %q: bad Content-Range %q", rng, cr)
	}
	if !bytes.Equal(got, data[first:last+1]) {
		t.Fatalf("Range %q: part %q holds other bytes (%d)", rng, cr, len(got))
	}
}
