package federation

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// writeMissing answers 404, 403 or 503 for a path no endpoint gave us
// (missingReport).
func (f *Federator) writeMissing(rq *request, e *entry) {
	code, msg := missingReport(rq.p, e)
	if code == http.StatusServiceUnavailable {
		var failed []string
		for _, a := range e.answers {
			if a.kind == ansUnavailable || a.kind == ansDown {
				failed = append(failed, a.m.name)
			}
		}
		pathUnavailable(rq, failed)
	}
	httpError(rq.w, code, msg)
}

// missingReport is the status and the text of an answer for a path no
// endpoint gave us, naming every endpoint asked and what it said. 404
// only when every endpoint that could hold the path said "not found".
func missingReport(p string, e *entry) (int, string) {
	var b strings.Builder
	switch e.status {
	case http.StatusNotFound:
		if len(e.answers) == 0 {
			fmt.Fprintf(&b, "lakefed: %s: not found: no endpoint holds this path\n", p)
		} else {
			fmt.Fprintf(&b, "lakefed: %s: not found on any endpoint that could hold it\n", p)
		}
	case http.StatusServiceUnavailable:
		var failed []string
		for _, a := range e.answers {
			if a.kind == ansUnavailable || a.kind == ansDown {
				failed = append(failed, a.m.name)
			}
		}
		// The first line is the one clients show: name who did not answer.
		fmt.Fprintf(&b, "lakefed: %s: not found on the endpoints that answered; unavailable: %s\n", p, strings.Join(failed, ", "))
	default:
		fmt.Fprintf(&b, "lakefed: %s: refused\n", p)
	}
	writeAnswers(&b, e)
	return e.status, b.String()
}

// writeNoReplica answers 503 when the path exists but no replica may be
// used now: all are down or were tried by the client.
func (f *Federator) writeNoReplica(rq *request, e *entry, tried []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "lakefed: %s: no usable replica (down, or tried by the client: %s)\n", rq.p, strings.Join(tried, ","))
	for _, r := range e.replicas {
		state := "up"
		if !r.m.h.Up() {
			state = "down"
		}
		fmt.Fprintf(&b, "%s: has it, %s\n", r.m.name, state)
	}
	var names []string
	for _, r := range e.replicas {
		names = append(names, r.m.name)
	}
	pathUnavailable(rq, names)
	httpError(rq.w, http.StatusServiceUnavailable, b.String())
}

// pathUnavailable sets the headers of a 503 about one path: Retry-After,
// and PathUnavailableHeader naming the endpoints behind this federator
// that failed, so that a federator asking this one as its upstream does
// not count the answer against this federator's health.
func pathUnavailable(rq *request, failed []string) {
	h := rq.w.Header()
	h.Set("Retry-After", retryAfter(rq.s))
	v := strings.Join(failed, ", ")
	if v == "" {
		v = "none named"
	}
	h.Set(httpx.PathUnavailableHeader, v)
}

func retryAfter(s *snapshot) string {
	return strconv.Itoa(max(1, int(s.cfg.RetryAfter.D()/time.Second)))
}

func writeAnswers(b *strings.Builder, e *entry) {
	for _, a := range e.answers {
		fmt.Fprintf(b, "%s: %s", a.m.name, a.kind)
		if a.err != "" {
			fmt.Fprintf(b, ": %s", a.err)
		}
		if d := a.took(); d > 0 {
			fmt.Fprintf(b, " (%s)", d.Round(10*time.Microsecond))
		}
		b.WriteByte('\n')
	}
}

func describeAnswers(e *entry) string {
	var parts []string
	for _, a := range e.answers {
		parts = append(parts, a.m.name+"="+a.kind.String())
	}
	return strings.Join(parts, " ")
}

// writeOpenFailure answers a proxied read whose every replica failed
// before the first byte: 404 when each said the file is gone, else 503
// with Retry-After, naming what each said.
func (f *Federator) writeOpenFailure(rq *request, err error) {
	code := http.StatusServiceUnavailable
	if endpoint.Class(err) == endpoint.ErrNotFound {
		code = http.StatusNotFound
	} else {
		pathUnavailable(rq, []string{"every replica"})
	}
	httpError(rq.w, code, fmt.Sprintf("lakefed: %s: no replica could be read\n%v", rq.p, err))
}

// httpError writes a short text/plain error: httpx.WriteError, which
// also drops the Link header a read answer may have set.
func httpError(w http.ResponseWriter, code int, msg string) { httpx.WriteError(w, code, msg) }
