package federation

import (
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
