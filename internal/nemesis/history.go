package nemesis

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
	"sync"
)

// Kind is what an operation of the history did.
type Kind string

// The kinds of operation.
const (
	// Put writes a version of a path over HTTP (the federator, or the
	// write buffer in front of it).
	Put Kind = "put"
	// Get reads a whole file over HTTP (following redirects).
	Get Kind = "get"
	// Range reads a byte range over HTTP.
	Range Kind = "range"
	// Head asks a file's size over HTTP.
	Head Kind = "head"
	// Delete removes a path over HTTP.
	Delete Kind = "delete"
	// XPut writes a version with xrdcp through the root:// door.
	XPut Kind = "xput"
	// XGet reads a whole file with xrdcp through the root:// door.
	XGet Kind = "xget"
	// Diverge is the nemesis writing a version straight into a site's
	// directory, behind the federation's back.
	Diverge Kind = "diverge"
	// FaultOp is a fault the nemesis started or healed (no path).
	FaultOp Kind = "fault"
	// Inspect lists the files a role left in its directory at the end
	// (Leftovers): the buffer's spool, the cache's blocks.
	Inspect Kind = "inspect"
)

// IsWrite reports whether k changes a path.
func (k Kind) IsWrite() bool { return k == Put || k == XPut || k == Delete || k == Diverge }

// IsRead reports whether k reads a path.
func (k Kind) IsRead() bool { return k == Get || k == Range || k == Head || k == XGet }

// Op is one operation of the history, as a line of the history file.
// Times are nanoseconds since the run began, on the runner's monotonic
// clock.
type Op struct {
	ID     int    `json:"id"`
	Client int    `json:"client"` // the workload goroutine; -1: the nemesis
	Node   string `json:"node"`   // the process asked: fed-0, cache-1, door, site-a
	Kind   Kind   `json:"op"`
	Path   string `json:"path,omitempty"`
	// Version is the version a Put, XPut or Diverge wrote, and the
	// tombstone a Delete wrote (every write of a path has its own).
	Version int   `json:"version,omitempty"`
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	// Off and Len are a Range's bytes.
	Off int64 `json:"off,omitempty"`
	Len int64 `json:"len,omitempty"`
	// Final marks the reads of the last phase, after every fault healed.
	Final bool `json:"final,omitempty"`

	// OK: the operation was answered as it should (2xx, or a 404 for a
	// read: Absent). A write that is not OK may have happened or not.
	OK     bool   `json:"ok"`
	Status int    `json:"status,omitempty"`
	Err    string `json:"err,omitempty"`
	// ErrKind classifies a failure: "503", "504", "507", "broken",
	// "conn", "door", "timeout", or the status of another answer.
	ErrKind string `json:"err_kind,omitempty"`

	// What a read got back.
	Absent   bool   `json:"absent,omitempty"` // 404, or the door's not found
	Size     int64  `json:"size,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Versions []int  `json:"versions,omitempty"`
	Mixed    bool   `json:"mixed,omitempty"`
	Unknown  bool   `json:"unknown,omitempty"`

	// Fault ops: the fault and its target.
	Fault  string `json:"fault,omitempty"`
	Target string `json:"target,omitempty"`
	// Leftovers are the files an Inspect found that nothing holds.
	Leftovers []string `json:"leftovers,omitempty"`
}

// never is the start and end of the state before any write.
const never = math.MinInt64

// History is the run's operations, appended by every client at once.
type History struct {
	mu  sync.Mutex // guards ops
	ops []Op
}

// Add appends op, giving it the next ID, and returns that ID.
func (h *History) Add(op Op) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
	return op.ID
}

// Ops returns a copy of the operations so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// WriteJSONL writes ops as JSON lines.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads a history WriteJSONL wrote, to check it again.
func ReadJSONL(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}
