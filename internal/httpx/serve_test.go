package httpx

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// memSource serves data, counting what ServeContent asks of it.
type memSource struct {
	data     []byte
	c        Content
	prepErr  error
	failAt   int // WriteRange call (1-based) that fails; 0: none
	prepared []Range
	writes   int
}

func (m *memSource) Describe([]Range) (Content, error) { return m.c, nil }

func (m *memSource) Prepare(send []Range, head bool) error {
	m.prepared = send
	return m.prepErr
}

func (m *memSource) WriteRange(w io.Writer, rg Range) error {
	m.writes++
	if m.writes == m.failAt {
		w.Write(m.data[rg.Start : rg.Start+rg.Length/2])
		return errors.New("broken")
	}
	_, err := w.Write(m.data[rg.Start : rg.Start+rg.Length])
	return err
}

func (m *memSource) Digests([]string) (map[string]string, error) {
	return map[string]string{Adler32: "00000001"}, nil
}

func serve(t *testing.T, m *memSource, method string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/f", nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	if err := ServeContent(w, r, int64(len(m.data)), m); err != nil {
		t.Fatalf("ServeContent: %v", err)
	}
	return w
}

func TestServeContent(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 10))
	mtime := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	lm := mtime.Format(http.TimeFormat)
	strong := Content{ETag: `"v1"`, ModTime: mtime}
	weak := Content{ETag: `"v1"`, ModTime: mtime, Weak: true}
	tests := []struct {
		name   string
		c      Content
		method string
		hdr    []string
		code   int
		cr     string // Content-Range
		body   string
	}{
		{"whole", strong, "GET", nil, 200, "", string(data)},
		{"head ignores range", strong, "HEAD", []string{"Range", "bytes=0-1"}, 200, "", ""},
		{"one range", strong, "GET", []string{"Range", "bytes=10-19"}, 206, "bytes 10-19/100", "0123456789"},
		{"suffix", strong, "GET", []string{"Range", "bytes=-3"}, 206, "bytes 97-99/100", "789"},
		{"unsatisfiable", strong, "GET", []string{"Range", "bytes=100-"}, 416, "bytes */100", ""},
		{"malformed", strong, "GET", []string{"Range", "bytes=abc"}, 416, "bytes */100", ""},
		{"overlapping", strong, "GET", []string{"Range", "bytes=0-,0-"}, 416, "bytes */100", ""},
		{"no unit", strong, "GET", []string{"Range", "=0-1"}, 416, "bytes */100", ""},
		{"other unit ignored", strong, "GET", []string{"Range", "items=0-1"}, 200, "", string(data)},
		{"If-None-Match", strong, "GET", []string{"If-None-Match", `"v1"`}, 304, "", ""},
		{"If-None-Match weakly", strong, "GET", []string{"If-None-Match", `W/"v1"`}, 304, "", ""},
		{"If-Match other", strong, "GET", []string{"If-Match", `"v0"`}, 412, "", ""},
		{"If-Modified-Since", strong, "GET", []string{"If-Modified-Since", lm}, 304, "", ""},
		{"If-Unmodified-Since past", strong, "GET", []string{"If-Unmodified-Since", mtime.Add(-time.Hour).Format(http.TimeFormat)}, 412, "", ""},
		{"precondition before range", strong, "GET", []string{"If-None-Match", `"v1"`, "Range", "bytes=abc"}, 304, "", ""},
		{"If-Range tag", strong, "GET", []string{"If-Range", `"v1"`, "Range", "bytes=0-0"}, 206, "bytes 0-0/100", "0"},
		{"If-Range date", strong, "GET", []string{"If-Range", lm, "Range", "bytes=0-0"}, 206, "bytes 0-0/100", "0"},
		{"If-Range other", strong, "GET", []string{"If-Range", `"v0"`, "Range", "bytes=0-0"}, 200, "", string(data)},
		{"If-Range other, bad range", strong, "GET", []string{"If-Range", `"v0"`, "Range", "bytes=abc"}, 200, "", string(data)},
		{"If-Range weak tag", strong, "GET", []string{"If-Range", `W/"v1"`, "Range", "bytes=0-0"}, 200, "", string(data)},
		// RFC 9110 §13.1.5: weak validators never let a Range apply.
		{"If-Range on weak validators", weak, "GET", []string{"If-Range", `"v1"`, "Range", "bytes=0-0"}, 200, "", string(data)},
		{"If-Range date on weak validators", weak, "GET", []string{"If-Range", lm, "Range", "bytes=0-0"}, 200, "", string(data)},
		{"range on weak validators", weak, "GET", []string{"Range", "bytes=0-0"}, 206, "bytes 0-0/100", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &memSource{data: data, c: tt.c}
			w := serve(t, m, tt.method, tt.hdr...)
			if w.Code != tt.code || w.Header().Get("Content-Range") != tt.cr || w.Body.String() != tt.body && tt.code/100 == 2 {
				t.Errorf("%s %v = %d, Content-Range %q, %d bytes; want %d, %q, %d bytes",
					tt.method, tt.hdr, w.Code, w.Header().Get("Content-Range"), w.Body.Len(), tt.code, tt.cr, len(tt.body))
			}
			if (tt.code/100 == 2 || tt.code == 304) && w.Header().Get("Etag") != `"v1"` {
				t.Errorf("%d without the ETag: %q", w.Code, w.Header().Get("Etag"))
			}
			if (tt.code == 304 || tt.code == 412 || tt.code == 416) && m.prepared != nil {
				t.Errorf("%d prepared %v: nothing should be read", w.Code, m.prepared)
			}
		})
	}
}

// Several ranges are one multipart/byteranges answer of the length it
// announces; a Forward source gets them in ascending order.
func TestServeContentMultipart(t *testing.T) {
	data := []byte(strings.Repeat("abcdefghij", 10))
	for _, forward := range []bool{false, true} {
		m := &memSource{data: data, c: Content{ETag: `"x"`, Forward: forward}}
		w := serve(t, m, "GET", "Range", "bytes=50-59,0-4")
		if w.Code != 206 || fmt.Sprint(w.Body.Len()) != w.Header().Get("Content-Length") {
			t.Fatalf("forward %v: %d, %d bytes, Content-Length %q", forward, w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
		}
		_, params, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		mr := multipart.NewReader(w.Body, params["boundary"])
		var got []string
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(p)
			got = append(got, p.Header.Get("Content-Range")+"="+string(b))
		}
		want := "[bytes 50-59/100=abcdefghij bytes 0-4/100=abcde]"
		if forward {
			want = "[bytes 0-4/100=abcde bytes 50-59/100=abcdefghij]"
		}
		if fmt.Sprint(got) != want {
			t.Errorf("forward %v: parts %v, want %s", forward, got, want)
		}
	}
}

// A source that fails before the status gets its error back, and nothing
// is written; one that fails after it breaks the response.
func TestServeContentFailures(t *testing.T) {
	data := bytes.Repeat([]byte("z"), 1000)
	gone := errors.New("gone")
	m := &memSource{data: data, prepErr: gone}
	r := httptest.NewRequest("GET", "/f", nil)
	w := httptest.NewRecorder()
	if err := ServeContent(w, r, 1000, m); err != gone || w.Code != 200 || w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("Prepare failing: %v, wrote %d %d bytes, header %v; want its error and nothing written", err, w.Code, w.Body.Len(), w.Header())
	}
	for _, rg := range []string{"", "bytes=0-99", "bytes=0-9,500-599"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ServeContent(w, r, 1000, &memSource{data: data, failAt: len(strings.Split(rg, ","))})
		}))
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if rg != "" {
			req.Header.Set("Range", rg)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			srv.Close()
			continue // broken before the headers arrived (they were still buffered)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if err == nil {
			t.Errorf("Range %q: %d bytes and no error from a source that broke; want a broken transfer", rg, len(body))
		}
	}
}

func TestServeContentDigest(t *testing.T) {
	m := &memSource{data: []byte("abc"), c: Content{ETag: `"x"`}}
	w := serve(t, m, "GET", "Want-Digest", "adler32", "Range", "bytes=0-0")
	if w.Code != 206 || w.Header().Get("Digest") != "adler32=00000001" {
		t.Errorf("Want-Digest on a range = %d, Digest %q", w.Code, w.Header().Get("Digest"))
	}
}

// ExampleServeContent serves a byte slice with ranges and conditionals.
func ExampleServeContent() {
	src := &memSource{data: []byte("hello, world"), c: Content{ETag: `"v1"`}}
	r := httptest.NewRequest("GET", "/greeting", nil)
	r.Header.Set("Range", "bytes=7-")
	w := httptest.NewRecorder()
	_ = ServeContent(w, r, int64(len(src.data)), src)
	fmt.Println(w.Code, w.Header().Get("Content-Range"), w.Body.String())
	// Output: 206 bytes 7-11/12 world
}
