package federation

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/endpoint"
)

// TestVersionKeepsInfo: a replica's version gives back the Info it was
// made from, whatever fields the kind filled in (modification times
// out of the nanosecond range included), times as the same instants.
func TestVersionKeepsInfo(t *testing.T) {
	mod := time.Date(2026, 11, 26, 4, 6, 11, 123456789, time.UTC)
	for _, c := range []struct {
		name string
		p    string
		in   endpoint.Info
	}{
		{"http kind", "/data/f1", endpoint.Info{Name: "f1", Size: 22, ModTime: mod, ETag: "18eb-98c663", Strong: true}},
		{"no tag, no time", "/data/f2", endpoint.Info{Name: "f2", Size: 0}},
		{"weak tag and sums", "/f3", endpoint.Info{Name: "f3", Size: 5, ModTime: mod, ETag: `W/"x"`, Checksums: map[string]string{"adler32": "0a0b0c0d"}}},
		{"directory", "/d", endpoint.Info{Name: "d", IsDir: true, ModTime: mod}},
		{"root", "/", endpoint.Info{Name: "/", IsDir: true}},
		{"posix kind", "/p/f", endpoint.Info{Name: "f", Size: 7, ModTime: mod.In(time.Local), Mode: 0o640, Owner: "alice", Group: "atlas",
			CTime: mod.Add(time.Second), ATime: mod.Add(2 * time.Second)}},
		{"a name of its own", "/x/f", endpoint.Info{Name: "F", Size: 1}},
		{"year 1", "/old", endpoint.Info{Name: "old", ModTime: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)}},
		{"year 9999", "/new", endpoint.Info{Name: "new", ModTime: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}},
		{"the epoch", "/zero", endpoint.Info{Name: "zero", ModTime: time.Unix(0, 0)}},
	} {
		v := newVersion(c.in, c.p)
		got := v.info(c.p)
		if !got.ModTime.Equal(c.in.ModTime) || got.ModTime.IsZero() != c.in.ModTime.IsZero() {
			t.Errorf("%s: ModTime = %v, want %v", c.name, got.ModTime, c.in.ModTime)
		}
		got.ModTime, c.in.ModTime = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, c.in) {
			t.Errorf("%s: info() = %+v, want %+v", c.name, got, c.in)
		}
	}
}

// TestWireEntryKeepsReplicas: an entry as the shared second level keeps
// it gives back every replica as looked up, leaves zero fields out, and
// an entry written with every field (as federators that leave none out
// write it) reads the same.
func TestWireEntryKeepsReplicas(t *testing.T) {
	a, b := newFake("ra", true), newFake("rb", true)
	a.put("/d/f", []byte("data"))
	b.put("/d/f", []byte("data"))
	tf := startFed(t, cfgYAML(slowHealth, ep("ra"), ep("rb")), a, b)
	s := tf.snap.Load()
	e := tf.lookup(t.Context(), s, "/d/f", 0)
	if len(e.replicas) != 2 {
		t.Fatalf("lookup found %d replicas, want 2", len(e.replicas))
	}
	raw, err := encodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(`"CTime"`)) || bytes.Contains(raw, []byte(`"Owner"`)) {
		t.Errorf("encodeEntry kept zero fields: %s", raw)
	}
	// The same entry with every field, endpoint.Info as encoding/json
	// writes it.
	var w struct {
		X int64 `json:"x"`
		A []struct {
			E string         `json:"e"`
			K answerKind     `json:"k"`
			I *endpoint.Info `json:"i,omitempty"`
			U string         `json:"u,omitempty"`
			B int64          `json:"b,omitempty"`
		} `json:"a"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	full, _ := json.Marshal(w)
	if !bytes.Contains(full, []byte(`"CTime"`)) {
		t.Fatalf("the full form lacks CTime: %s", full)
	}
	for _, form := range []struct {
		name string
		b    []byte
	}{{"as encoded", raw}, {"every field", full}} {
		d := tf.decodeEntry(s, "/d/f", form.b)
		if d == nil || len(d.replicas) != len(e.replicas) {
			t.Fatalf("%s: decodeEntry = %+v", form.name, d)
		}
		for i, r := range e.replicas {
			want, got := r.info(), d.replicas[i].info()
			if !got.ModTime.Equal(want.ModTime) {
				t.Errorf("%s: replica %d ModTime = %v, want %v", form.name, i, got.ModTime, want.ModTime)
			}
			got.ModTime, want.ModTime = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, want) || d.replicas[i].url() != r.url() {
				t.Errorf("%s: replica %d = %+v at %q, want %+v at %q", form.name, i, got, d.replicas[i].url(), want, r.url())
			}
		}
	}
}
