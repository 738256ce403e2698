package nemesis

import (
	"slices"
	"testing"
	"time"
)

// h builds a history, numbering its ops.
func h(ops ...Op) []Op {
	for i := range ops {
		ops[i].ID = i
		if ops[i].Node == "" {
			ops[i].Node = "fed-0"
		}
		if ops[i].Path == "" && ops[i].Kind != Inspect {
			ops[i].Path = "/p"
		}
	}
	return ops
}

func put(v int, start, end int64, ok bool) Op {
	op := Op{Kind: Put, Version: v, Start: start, End: end, OK: ok}
	if !ok {
		op.ErrKind = "503"
	}
	return op
}

func del(v int, start, end int64) Op {
	return Op{Kind: Delete, Version: v, Start: start, End: end, OK: true}
}

func get(start, end int64, versions ...int) Op {
	return Op{Kind: Get, Start: start, End: end, OK: true, Versions: versions}
}

func absent(start, end int64) Op {
	return Op{Kind: Get, Start: start, End: end, OK: true, Absent: true}
}

func final(op Op) Op { op.Final = true; return op }

func on(node string, op Op) Op { op.Node = node; return op }

var testLimits = Limits{ErrKinds: []string{"503", "504", "broken", "conn"}, MaxLatency: time.Second}

// TestCheckerFindsEach feeds the checker one history per violation and
// wants exactly that violation, on the op that shows it.
func TestCheckerFindsEach(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		want string
		op   int
	}{
		{"lost write: an acknowledged put not read at the end",
			h(put(1, 0, 10, true), final(absent(100, 110))), LostWrite, 1},
		{"lost write: the end shows an older version",
			h(put(1, 0, 10, true), put(2, 20, 30, true), final(get(100, 110, 1))), LostWrite, 2},
		{"mixed read: two versions in one answer",
			h(put(1, 0, 10, true), put(2, 20, 30, true), Op{Kind: Range, Start: 40, End: 50, OK: true, Versions: []int{1, 2}, Mixed: true}), MixedRead, 2},
		{"stale read: an older version after a newer put was acknowledged",
			h(put(1, 0, 10, true), put(2, 20, 30, true), get(40, 50, 1)), StaleRead, 2},
		{"stale read: a deleted version after the delete was acknowledged",
			h(put(1, 0, 10, true), del(2, 20, 30), get(40, 50, 1)), StaleRead, 2},
		{"false not-found: a put acknowledged before the read began",
			h(put(1, 0, 10, true), absent(20, 30)), FalseNotFound, 1},
		{"false not-found through a HEAD",
			h(put(1, 0, 10, true), Op{Kind: Head, Start: 20, End: 30, OK: true, Absent: true}), FalseNotFound, 1},
		{"unknown bytes",
			h(put(1, 0, 10, true), Op{Kind: Get, Start: 20, End: 30, OK: true, Unknown: true}), UnknownBytes, 1},
		{"a version no write of the path made",
			h(put(1, 0, 10, true), get(20, 30, 7)), UnknownBytes, 1},
		{"a version read before its write began",
			h(get(0, 10, 1), put(1, 20, 30, true)), FutureRead, 0},
		{"non-monotonic: a node goes back after showing an unacknowledged write",
			h(put(1, 0, 10, true), put(2, 20, 30, false), on("fed-1", get(40, 50, 2)), on("fed-1", get(60, 70, 1))), NonMonotonic, 3},
		{"non-monotonic: not found after a version, through one node",
			h(put(1, 0, 10, false), on("fed-1", get(40, 50, 1)), on("fed-1", absent(60, 70))), NonMonotonic, 2},
		{"stale read of a divergence a later acknowledged put replaced",
			h(put(1, 0, 10, true), Op{Kind: Diverge, Client: -1, Version: 2, Start: 20, End: 21, OK: true}, put(3, 50, 60, true), get(70, 80, 2)), StaleRead, 3},
		{"undeclared error",
			h(Op{Kind: Get, Start: 0, End: 10, Status: 500, ErrKind: "500"}), UndeclaredErr, 0},
		{"too slow",
			h(Op{Kind: Get, Start: 0, End: int64(2 * time.Second), ErrKind: "504"}), TooSlow, 0},
		{"a final read that still fails after the heal",
			h(put(1, 0, 10, true), Op{Kind: Get, Start: 100, End: 110, Final: true, Status: 503, ErrKind: "503"}), Unreadable, 1},
		{"a timeout on another node than the one cut off",
			h(Op{Kind: FaultOp, Client: -1, Node: "fed-2", Fault: "partition", Target: "fed-2", Start: 0, End: int64(5 * time.Second), OK: true},
				Op{Kind: Get, Node: "fed-1", Start: int64(time.Second), End: int64(1500 * time.Millisecond), ErrKind: "timeout"}), UndeclaredErr, 1},
		{"too slow beyond the time its node was cut off",
			h(Op{Kind: FaultOp, Client: -1, Node: "fed-2", Fault: "partition", Target: "fed-2", Start: 0, End: int64(time.Second), OK: true},
				Op{Kind: Put, Node: "fed-2", Version: 1, Start: int64(500 * time.Millisecond), End: int64(2600 * time.Millisecond), Status: 503, ErrKind: "503"}), TooSlow, 1},
		{"orphaned spool files",
			h(Op{Kind: Inspect, Client: -1, Node: "buffer", Leftovers: []string{"data/17"}}), OrphanLeftover, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.ops, testLimits)
			if len(got) != 1 || got[0].Kind != tt.want || got[0].Op != tt.op {
				t.Fatalf("Check = %v, want one %s on op %d", got, tt.want, tt.op)
			}
		})
	}
}

// TestCheckerLegal feeds histories the model allows, with writes and
// reads overlapping in time, and wants no violation.
func TestCheckerLegal(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
	}{
		{"overlapping puts may land in either order, even at the end",
			h(put(1, 0, 10, true), put(2, 5, 20, true), get(12, 15, 1), get(12, 15, 2), get(25, 30, 1), final(get(100, 110, 1)))},
		{"a read overlapping a put sees either version",
			h(put(1, 0, 10, true), put(2, 20, 30, true), get(25, 35, 1), get(25, 35, 2), get(31, 40, 2))},
		{"a failed put may land late, or never",
			h(put(1, 0, 10, true), put(2, 20, 30, false), get(40, 50, 1), get(60, 70, 2), on("fed-1", get(80, 90, 1)), final(get(100, 110, 2)))},
		{"not found before any put, and with a delete overlapping",
			h(absent(0, 5), put(1, 10, 20, true), del(2, 30, 40), get(35, 45, 1), absent(35, 45), final(absent(100, 110)))},
		{"a put after a delete",
			h(put(1, 0, 10, true), del(2, 20, 30), put(3, 40, 50, true), final(get(100, 110, 3)))},
		{"a HEAD whose size two versions share",
			h(put(1, 0, 10, true), put(2, 20, 30, true), Op{Kind: Head, Start: 40, End: 50, OK: true, Versions: []int{1, 2}})},
		{"a divergence is read, or not, until the next acknowledged write",
			h(put(1, 0, 10, true), Op{Kind: Diverge, Client: -1, Version: 2, Start: 20, End: 21, OK: true}, get(30, 40, 1), get(30, 40, 2), get(45, 50, 1), put(3, 50, 60, true), final(get(100, 110, 3)))},
		{"declared failures within the bound",
			h(Op{Kind: Get, Start: 0, End: 10, Status: 503, ErrKind: "503"}, Op{Kind: Put, Version: 1, Start: 0, End: 10, ErrKind: "conn"})},
		{"another node may still show the older version of an unacknowledged write",
			h(put(1, 0, 10, true), put(2, 20, 30, false), on("fed-1", get(40, 50, 2)), on("fed-2", get(60, 70, 1)))},
		{"a request to a node cut off times out",
			h(Op{Kind: FaultOp, Client: -1, Node: "fed-2", Fault: "partition", Target: "fed-2", Start: 0, End: int64(5 * time.Second), OK: true},
				Op{Kind: Put, Node: "fed-2", Version: 1, Start: int64(time.Second), End: int64(61 * time.Second), ErrKind: "timeout"})},
		{"an error answered late from a node cut off part of the time, within the bound without that time",
			h(Op{Kind: FaultOp, Client: -1, Node: "fed-2", Fault: "partition", Target: "fed-2", Start: 0, End: int64(time.Second), OK: true},
				Op{Kind: FaultOp, Client: -1, Node: "fed-2", Fault: "partition", Target: "fed-2", Start: int64(2 * time.Second), End: int64(3 * time.Second), OK: true},
				Op{Kind: Put, Node: "fed-2", Version: 1, Start: int64(500 * time.Millisecond), End: int64(2900 * time.Millisecond), Status: 503, ErrKind: "503"})},
		{"an empty inspection",
			h(Op{Kind: Inspect, Client: -1, Node: "cache-0"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.ops, testLimits); len(got) != 0 {
				t.Fatalf("Check = %v, want none", got)
			}
		})
	}
}

// TestCheckerLostWriteNamesTheWrite: the violation names the write that
// should have been read.
func TestCheckerLostWriteNamesTheWrite(t *testing.T) {
	got := Check(h(put(1, 0, 10, true), put(2, 20, 30, true), put(3, 25, 40, true), final(get(100, 110, 1))), testLimits)
	if len(got) != 1 || !slices.Equal(got[0].Related, []int{1, 2}) {
		t.Fatalf("Check = %v, want one lost write naming ops 1 and 2 (overlapping, either may be last)", got)
	}
}
