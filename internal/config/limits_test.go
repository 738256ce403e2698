package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// laughsLists is a "billion laughs" shaped to the config's own nested
// lists: k client networks that are all the same anchored network, whose
// networks list holds k aliases of one string. The file is ~12k bytes;
// walking it naively decodes k*k strings.
func laughsLists(k int) []byte {
	var b bytes.Buffer
	b.WriteString("federation:\n  endpoints: [{name: a, url: 'http://h/'}]\n  client_networks:\n")
	b.WriteString("    - &c {location: [1, 2], networks: [&s 10.0.0.0/8")
	for range k {
		b.WriteString(", *s")
	}
	b.WriteString("]}\n")
	for range k {
		b.WriteString("    - *c\n")
	}
	return b.Bytes()
}

// laughsClassic is the classic billion laughs: nine levels, each a list
// of width aliases of the level below, under a field the config reads
// (an endpoint's location, whose items become leaves).
func laughsClassic(width int) []byte {
	var b bytes.Buffer
	b.WriteString("federation:\n  endpoints: [{name: a, url: 'http://h/'}]\n  x:\n")
	b.WriteString("    - &l0 [1, 2]\n")
	for lv := 1; lv < 9; lv++ {
		fmt.Fprintf(&b, "    - &l%d [*l%d", lv, lv-1)
		for range width - 1 {
			fmt.Fprintf(&b, ", *l%d", lv-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("  client_networks:\n    - networks: *l8\n      location: [1, 2]\n")
	return b.Bytes()
}

// TestAliasBomb: files whose aliases expand to millions of nodes are
// refused fast, in bounded memory, with the line where expansion ran
// over. Before the budget the 74 KB lists file took seconds and
// gigabytes.
func TestAliasBomb(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"lists 74KB", laughsLists(6200)},
		{"lists 250KB", laughsLists(21000)},
		{"classic", laughsClassic(10)},
		{"classic wide", laughsClassic(400)},
	}
	lineRE := regexp.MustCompile(`(?m)^line [1-9][0-9]*: .*aliases expand to more than`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("file is %d bytes", len(tt.data))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := Parse(tt.data)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("Parse succeeded, want an aliasing error")
			}
			if !lineRE.MatchString(err.Error()) {
				t.Errorf("Parse error %q has no aliasing error with a line", firstLine(err))
			}
			if took > raceSlowdown*time.Second {
				t.Errorf("Parse took %v, want under %v", took, raceSlowdown*time.Second)
			}
			// TotalAlloc counts every byte allocated, freed or not: the
			// bound holds however the collector ran.
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
				t.Errorf("Parse allocated %d MiB, want under 256 MiB", grew>>20)
			}
			t.Logf("took %v, allocated %d MiB: %s", took, (after.TotalAlloc-before.TotalAlloc)>>20, lineRE.FindString(err.Error()))
		})
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// TestAliasesStillWork: a file that reuses a block with an anchor, as
// configs do, still loads.
func TestAliasesStillWork(t *testing.T) {
	var b strings.Builder
	b.WriteString("federation:\n  client_networks:\n    - &cern {networks: [10.0.0.0/8, 192.168.0.0/16], location: [46.2, 6.1]}\n")
	for range 200 {
		b.WriteString("    - *cern\n")
	}
	b.WriteString("  endpoints: [{name: a, url: 'http://h/'}]\n")
	c, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if got := len(c.Federation.ClientNetworks); got != 201 {
		t.Errorf("client networks = %d, want 201", got)
	}
}

// TestLoadSizeCap: Load refuses a file larger than MaxFileSize without
// reading it all.
func TestLoadSizeCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	data := bytes.Repeat([]byte("# padding padding padding padding padding padding\n"), MaxFileSize/50+10)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Load(%d bytes) = %v, want ErrTooLarge", len(data), err)
	}
}

// TestErrorCap: a mistake repeated by aliases is reported maxErrors times
// and then cut short, not once per copy.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("federation:\n  endpoints: [{name: a, url: 'http://h/'}]\n  client_networks:\n    - &c {networks: [10.0.0.0/8], locaton: [1, 2]}\n")
	for range 500 {
		b.WriteString("    - *c\n")
	}
	_, err := Parse([]byte(b.String()))
	if err == nil {
		t.Fatal("Parse succeeded, want unknown-field errors")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.Contains(lines[len(lines)-1], "too many errors") {
		t.Errorf("Parse error has %d lines ending %q, want %d ending in \"too many errors\"", len(lines), lines[len(lines)-1], maxErrors+1)
	}
}
