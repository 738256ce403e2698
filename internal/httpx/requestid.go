package httpx

import (
	"context"
	"math/rand/v2"
	"net/http"
)

// RequestIDHeader carries a request's ID: every listener of lakefed (the
// federator's, the cache's, the storage role's, fast path included)
// answers with it, and the request's log lines carry the same ID under
// request_id, so that an answer a user reports can be found in the logs.
// A client (or a proxy in front) that sends one has it reused, when it is
// sane (ValidRequestID), so an ID can follow a request across services.
// It is written in the form net/http gives header names.
const RequestIDHeader = "X-Request-Id"

// MaxRequestIDLen bounds an ID a client sends that is reused: enough for
// a UUID (36), a W3C trace-id (32) or a Heroku-style ID, small enough that
// a client cannot make every log line long.
const MaxRequestIDLen = 64

// TagRequest gives r its ID: the one the client sent in X-Request-ID if
// that is sane, else a new one (16 hex digits). It sets the header on w's
// answer and returns r with the ID in its context (RequestID), where the
// request's log lines find it. A request already tagged (a handler
// behind another that tagged it) keeps its ID. Every HTTP front calls
// it first; the storage role's fast path, which writes its headers
// itself, calls AppendRequestID, which decides the same way.
func TagRequest(w http.ResponseWriter, r *http.Request) (*http.Request, string) {
	if id := RequestID(r.Context()); id != "" {
		return r, id
	}
	var sent string
	if v := r.Header[RequestIDHeader]; len(v) == 1 {
		sent = v[0] // several values: none is the client's one ID
	}
	id := string(appendRequestID(make([]byte, 0, 16), sent))
	w.Header()[RequestIDHeader] = []string{id}
	return r.WithContext(WithRequestID(r.Context(), id)), id
}

// RequestIDs is h behind TagRequest: the middleware form, for a listener
// whose handlers come in layers.
func RequestIDs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, _ = TagRequest(w, r)
		h.ServeHTTP(w, r)
	})
}

// AppendRequestID appends to b the ID of a request whose client sent
// sent as its X-Request-ID (nil: none): sent if it is sane, else a new
// one. It allocates nothing, for the storage role's fast path.
func AppendRequestID(b, sent []byte) []byte { return appendRequestID(b, sent) }

// NewRequestID returns a new request ID, for a request that comes
// without one (the root:// door's).
func NewRequestID() string { return string(appendRequestID(make([]byte, 0, 16), "")) }

// appendRequestID is the one place an ID is chosen.
func appendRequestID[T string | []byte](b []byte, sent T) []byte {
	if ValidRequestID(sent) {
		return append(b, sent...)
	}
	// A random 64-bit number: IDs need to be unique among the requests
	// of a log, not unguessable (they grant nothing), and math/rand/v2's
	// generator is per thread, so that busy listeners do not contend on
	// it as they would on the operating system's.
	const hexDigits = "0123456789abcdef"
	x := rand.Uint64()
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hexDigits[x>>i&0xf])
	}
	return b
}

// ValidRequestID reports whether a client's X-Request-ID is reused: 1 to
// MaxRequestIDLen characters, each an RFC 9110 token character (§5.6.2),
// which keeps spaces, quotes and control characters out of the logs and
// the answer's header.
func ValidRequestID[T string | []byte](s T) bool {
	if len(s) == 0 || len(s) > MaxRequestIDLen {
		return false
	}
	for i := range len(s) {
		if !tokenChar[s[i]] {
			return false
		}
	}
	return true
}

// tokenChar marks the tchar of RFC 9110 §5.6.2.
var tokenChar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// ForwardRequestID sets X-Request-ID in h, the header of a request made
// on behalf of the request ctx belongs to (a proxied read, a federator's
// Stat of an endpoint), so that a lakefed server there, which reuses a
// sane ID, logs its part under the same ID. Without one in ctx it does
// nothing.
func ForwardRequestID(ctx context.Context, h http.Header) {
	if id := RequestID(ctx); id != "" {
		h[RequestIDHeader] = []string{id}
	}
}

// requestIDKey is the context key of a request's ID.
type requestIDKey struct{}

// WithRequestID returns ctx carrying the request ID id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request ID ctx carries, "" when none.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
