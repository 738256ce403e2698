package httpx

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestTagRequest: a sane X-Request-ID is reused, anything else gets a
// fresh 16-hex-digit ID; either way it is in the answer's header and the
// request's context, and a second tag keeps the first.
func TestTagRequest(t *testing.T) {
	fresh := regexp.MustCompile(`^[0-9a-f]{16}$`)
	tests := []struct {
		name string
		sent []string // X-Request-ID values; nil: none
		want string   // "": a fresh one
	}{
		{"none", nil, ""},
		{"uuid", []string{"0f8fad5b-d9cb-469f-a165-70867728950e"}, "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"token chars", []string{"job.42~run_7!#$%&'*+^`|"}, "job.42~run_7!#$%&'*+^`|"},
		{"empty", []string{""}, ""},
		{"space", []string{"a b"}, ""},
		{"quote", []string{`a"b`}, ""},
		{"control", []string{"a\x01b"}, ""},
		{"non-ascii", []string{"é"}, ""},
		{"longest", []string{strings.Repeat("a", MaxRequestIDLen)}, strings.Repeat("a", MaxRequestIDLen)},
		{"too long", []string{strings.Repeat("a", MaxRequestIDLen+1)}, ""},
		{"two values", []string{"a", "b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x", nil)
			if tt.sent != nil {
				r.Header["X-Request-Id"] = tt.sent
			}
			w := httptest.NewRecorder()
			r2, id := TagRequest(w, r)
			if tt.want != "" && id != tt.want || tt.want == "" && !fresh.MatchString(id) {
				t.Errorf("TagRequest with %q = %q, want %q (empty: 16 fresh hex digits)", tt.sent, id, tt.want)
			}
			if got := w.Header().Get("X-Request-ID"); got != id {
				t.Errorf("X-Request-ID header = %q, want %q", got, id)
			}
			if got := RequestID(r2.Context()); got != id {
				t.Errorf("RequestID(ctx) = %q, want %q", got, id)
			}
			if got := string(AppendRequestID([]byte("x:"), []byte(strings.Join(tt.sent, "")))); tt.want != "" && got != "x:"+tt.want {
				t.Errorf("AppendRequestID = %q, want %q", got, "x:"+tt.want)
			}
			w2 := httptest.NewRecorder()
			if _, again := TagRequest(w2, r2); again != id {
				t.Errorf("TagRequest of a tagged request = %q, want its ID %q", again, id)
			}
		})
	}
	a, b := string(AppendRequestID(nil, nil)), string(AppendRequestID(nil, nil))
	if a == b || !fresh.MatchString(a) {
		t.Errorf("two fresh IDs %q and %q: want different, 16 hex digits each", a, b)
	}
}

// TestAppendRequestIDAllocs: the fast path's ID costs no allocation.
func TestAppendRequestIDAllocs(t *testing.T) {
	buf := make([]byte, 0, 128)
	sent := []byte("0f8fad5b-d9cb-469f-a165-70867728950e")
	if n := testing.AllocsPerRun(100, func() {
		_ = AppendRequestID(buf[:0], nil)
		_ = AppendRequestID(buf[:0], sent)
	}); n != 0 {
		t.Errorf("AppendRequestID allocates %v times, want 0", n)
	}
}
