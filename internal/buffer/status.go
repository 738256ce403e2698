package buffer

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lakefed/lakefed/internal/httpx"
)

// The history of pending bytes that /api/buffer gives for a plot: one
// sample every historyEvery, the last historyLen of them (an hour).
const (
	historyEvery = 10 * time.Second
	historyLen   = 360
)

// maxFailures bounds the failures Status lists (the oldest pending
// files' failures first).
const maxFailures = 100

// Status is what the buffer holds and how its migrations go.
type Status struct {
	// PendingFiles and PendingBytes are the acknowledged files not yet
	// verified on every target.
	PendingFiles int   `json:"pending_files"`
	PendingBytes int64 `json:"pending_bytes"`
	// OldestPendingSeconds is the age of the oldest pending file; 0 when
	// none is pending.
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
	// FailingFiles counts the pending files and deletes whose last
	// migration attempt failed, and the files whose spool copy is
	// damaged: every one of them, unlike Failures.
	FailingFiles int `json:"failing_files"`
	// OldestFailingSeconds is how long the longest-failing of them has
	// been failing without a success in between, across restarts (the
	// journal keeps when a file began failing); 0 when none fails.
	OldestFailingSeconds float64 `json:"oldest_failing_seconds"`
	// HeldFiles and HeldBytes count every file in the buffer: pending,
	// and migrated files kept to be read locally.
	HeldFiles int   `json:"held_files"`
	HeldBytes int64 `json:"held_bytes"`
	// PendingDeletes are the DELETEs acknowledged and not yet carried
	// out on every target.
	PendingDeletes int `json:"pending_deletes"`
	// UsedBytes is the space taken in Dir, uploads in progress included;
	// MaxBytes the limit (0: none).
	UsedBytes int64 `json:"used_bytes"`
	MaxBytes  int64 `json:"max_bytes"`
	// Migrated counts the files this process verified on every target.
	Migrated int64 `json:"migrated"`
	// Failures are the pending files whose last attempt failed.
	Failures []Failure `json:"failures"`
	// Targets says how each target took its copies, since start.
	Targets []TargetStatus `json:"targets"`
}

// Failure is a pending file (or delete) whose last migration attempt
// failed, or a pending file whose spool copy is damaged (Reason
// "spool_damaged", Target "buffer": it is not migrated).
type Failure struct {
	Path     string    `json:"path"`
	Target   string    `json:"target"`
	Reason   string    `json:"reason"` // a label: unavailable, verify_adler32, spool_damaged, ...
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at"`
	NextTry  time.Time `json:"next_try"`
}

// TargetStatus is one target's record since start.
type TargetStatus struct {
	Name  string `json:"name"`
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
	// Seconds is the time spent in verified copies; BytesPerSecond is
	// Bytes over it (the throughput of one copy, not of the link).
	Seconds        float64 `json:"seconds"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	Failures       int64   `json:"failures"`
	LastError      string  `json:"last_error,omitempty"`
	// DownUntil is set while the target is held off as unavailable: no
	// copy goes to it before then (then one probes it).
	DownUntil time.Time `json:"down_until,omitzero"`
}

// Sample is one point of the pending-bytes history.
type Sample struct {
	Time         time.Time `json:"t"`
	PendingBytes int64     `json:"pending_bytes"`
	PendingFiles int       `json:"pending_files"`
}

// stats are the counters since start, under their own lock (the mover
// updates them outside Buffer.mu).
type stats struct {
	mu       sync.Mutex
	migrates int64
	targets  map[string]*TargetStatus
}

func (s *stats) init() { s.targets = map[string]*TargetStatus{} }

func (s *stats) targetLocked(name string) *TargetStatus {
	t := s.targets[name]
	if t == nil {
		t = &TargetStatus{Name: name}
		s.targets[name] = t
	}
	return t
}

func (s *stats) moved(name string, n int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targetLocked(name)
	t.Files++
	t.Bytes += n
	t.Seconds += d.Seconds()
}

func (s *stats) failure(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targetLocked(name)
	t.Failures++
	t.LastError = short(err.Error())
}

func (s *stats) migrated() {
	s.mu.Lock()
	s.migrates++
	s.mu.Unlock()
}

// ring is a bounded history of samples.
type ring struct {
	buf  []Sample
	next int
	full bool
}

func newRing(n int) ring { return ring{buf: make([]Sample, n)} }

func (r *ring) add(s Sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

func (r *ring) list() []Sample {
	if !r.full {
		return slices.Clone(r.buf[:r.next])
	}
	return append(slices.Clone(r.buf[r.next:]), r.buf[:r.next]...)
}

// sample adds the pending figures at now to the history.
func (b *Buffer) sample(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Sample{Time: now}
	for _, e := range b.cur {
		if e.state == statePending {
			s.PendingFiles++
			s.PendingBytes += e.size
		}
	}
	b.history.add(s)
}

// Status returns the buffer's state now.
func (b *Buffer) Status() Status { return b.status(nil) }

// status is Status, with only the failures of the paths listed allows
// (nil: all of them).
func (b *Buffer) status(listed func(p string) bool) Status {
	now := time.Now()
	var st Status
	b.mu.Lock()
	var oldest, failing time.Time
	for _, e := range b.cur {
		if e.deleting() {
			st.PendingDeletes++
		} else {
			st.HeldFiles++
			st.HeldBytes += e.size
		}
		if e.state == statePending {
			st.PendingFiles++
			st.PendingBytes += e.size
			if oldest.IsZero() || e.mtime.Before(oldest) {
				oldest = e.mtime
			}
		}
		if e.damaged != "" || (e.state != stateMigrated && e.lastErr != "") {
			st.FailingFiles++
			if s := e.failingSince; !s.IsZero() && (failing.IsZero() || s.Before(failing)) {
				failing = s
			}
		}
		if listed != nil && !listed(e.path) {
			continue
		}
		switch {
		case e.damaged != "":
			st.Failures = append(st.Failures, Failure{Path: e.path, Target: "buffer", Reason: reasonDamaged,
				Error: e.damaged, Attempts: e.attempts, At: e.failedAt})
		case e.state != stateMigrated && e.lastErr != "":
			st.Failures = append(st.Failures, Failure{Path: e.path, Target: e.failTarget, Reason: e.failReason,
				Error: e.lastErr, Attempts: e.attempts, At: e.failedAt, NextTry: e.nextTry})
		}
	}
	st.UsedBytes = b.used + b.reserved
	st.MaxBytes = b.cfg.MaxBytes
	b.mu.Unlock()
	if !oldest.IsZero() {
		st.OldestPendingSeconds = now.Sub(oldest).Seconds()
	}
	if !failing.IsZero() {
		st.OldestFailingSeconds = now.Sub(failing).Seconds()
	}
	slices.SortFunc(st.Failures, func(a, c Failure) int {
		if n := a.At.Compare(c.At); n != 0 {
			return n
		}
		return strings.Compare(a.Path, c.Path)
	})
	if len(st.Failures) > maxFailures {
		st.Failures = st.Failures[:maxFailures]
	}
	if st.Failures == nil {
		st.Failures = []Failure{}
	}

	b.stats.mu.Lock()
	st.Migrated = b.stats.migrates
	names := make([]string, 0, len(b.targets))
	for n := range b.targets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		t := *b.stats.targetLocked(n)
		if t.Seconds > 0 {
			t.BytesPerSecond = float64(t.Bytes) / t.Seconds
		}
		st.Targets = append(st.Targets, t)
	}
	b.stats.mu.Unlock()
	b.mu.Lock()
	for i := range st.Targets {
		if h := b.down[st.Targets[i].Name]; h != nil && h.until.After(now) {
			st.Targets[i].DownUntil = h.until
		}
	}
	b.mu.Unlock()
	return st
}

// History returns the pending figures Run sampled, one every 10 s over
// the last hour, oldest first: what /api/buffer gives as "history" and the
// dashboard plots. It is empty before Run's first sample; it is a copy.
func (b *Buffer) History() []Sample {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.history.list()
}

// StatusHandler serves GET /api/buffer: the Status as JSON, with the
// history of pending bytes ("history": samples, oldest first) for the
// dashboard's plot. Failures are only those of paths Options.MayList lets
// the caller list.
func (b *Buffer) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpx.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		var listed func(p string) bool
		if b.opts.MayList != nil {
			listed = func(p string) bool { return b.opts.MayList(r, p) }
		}
		body, err := json.Marshal(struct {
			Status
			History []Sample `json:"history"`
		}{b.status(listed), b.History()})
		if err != nil {
			httpx.WriteError(w, http.StatusInternalServerError, "internal error")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(body, '\n'))
	})
}

// metrics are the lakefed_buffer_* series. The gauges are read from the
// buffer when scraped, so they are never stale.
type metrics struct {
	reg      prometheus.Registerer
	cs       []prometheus.Collector
	accepted prometheus.Counter
	rejected prometheus.Counter
	migrated prometheus.Counter
	failures *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

func newMetrics(b *Buffer, reg prometheus.Registerer) (*metrics, error) {
	const ns = "lakefed_buffer_"
	m := &metrics{
		reg: reg,
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "accepted_total",
			Help: "PUTs acknowledged (durable and journaled)."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "full_total",
			Help: "PUTs refused (507) or sent to the target (307) because the buffer was full."}),
		migrated: prometheus.NewCounter(prometheus.CounterOpts{Name: ns + "migrated_total",
			Help: "Files verified on every target."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "failures_total",
			Help: "Failed copies to a target, by reason."}, []string{"target", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "migrated_bytes_total",
			Help: "Bytes verified on each target."}, []string{"target"}),
	}
	pending := func(f func(Status) float64) func() float64 { return func() float64 { return f(b.Status()) } }
	m.cs = []prometheus.Collector{m.accepted, m.rejected, m.migrated, m.failures, m.bytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "pending_files",
			Help: "Acknowledged files not yet verified on every target."},
			pending(func(s Status) float64 { return float64(s.PendingFiles) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "pending_bytes",
			Help: "Bytes of the pending files."},
			pending(func(s Status) float64 { return float64(s.PendingBytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "oldest_pending_seconds",
			Help: "Age of the oldest pending file (0: none)."},
			pending(func(s Status) float64 { return s.OldestPendingSeconds })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "failing_files",
			Help: "Pending files and deletes whose last migration attempt failed, and files whose spool copy is damaged."},
			pending(func(s Status) float64 { return float64(s.FailingFiles) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "oldest_failing_seconds",
			Help: "How long the longest-failing pending file has failed every attempt (0: none failing), counted across restarts."},
			pending(func(s Status) float64 { return s.OldestFailingSeconds })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "pending_deletes",
			Help: "DELETEs acknowledged and not yet carried out on every target."},
			pending(func(s Status) float64 { return float64(s.PendingDeletes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "used_bytes",
			Help: "Bytes the buffer takes on its disk, uploads in progress included."},
			pending(func(s Status) float64 { return float64(s.UsedBytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "max_bytes",
			Help: "The limit on used_bytes past which PUTs are refused or sent to the target (0: none)."},
			func() float64 { return float64(b.cfg.MaxBytes) }),
	}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.cs {
		if err := reg.Register(c); err != nil {
			for _, d := range m.cs[:i] {
				reg.Unregister(d)
			}
			return nil, err
		}
	}
	return m, nil
}

// unregister takes the series off the registry (Close), so a buffer
// opened again in the same process can register its own.
func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.cs {
		m.reg.Unregister(c)
	}
}
