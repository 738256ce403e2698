// Package nemesis is a Jepsen-style fault run of a whole lake: client
// goroutines write and read files whose bytes name the write they came
// from, a nemesis driven by a seeded RNG kills, stops, cuts off, fills
// and skews the lake's processes, and a checker holds the recorded
// history to the model in checker.go.
//
// The library here is the history, the content of the files, the
// workload's operations, the schedule of faults, the checker and the
// report; the lake itself (processes, namespace, tmpfs) is started by
// the runner, TestNemesis, built with the nemesis tag:
//
//	NEMESIS_DURATION=3m NEMESIS_SEED=1 go test -tags nemesis -run TestNemesis ./internal/nemesis
//
//	var h nemesis.History
//	h.Add(nemesis.Op{Kind: nemesis.Put, Path: "/a", Version: 1, OK: true})
//	vs := nemesis.Check(h.Ops(), limits)
//	nemesis.Summary(os.Stdout, seed, h.Ops(), vs)
package nemesis
