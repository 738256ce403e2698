package nemesis

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestContentTraced: every range of a version decodes to that version,
// a range that is half one version and half another decodes as a mix,
// and bytes of no version as unknown.
func TestContentTraced(t *testing.T) {
	const p = "/d/f"
	cands := []int{1, 2, 3, 4, 5}
	for _, v := range cands {
		c := Content(p, v)
		if int64(len(c)) != Size(p, v) || !strings.HasPrefix(string(c), Header(p, v)) {
			t.Fatalf("Content(%q, %d): %d bytes, header %q", p, v, len(c), c[:30])
		}
		if !bytes.Equal(c, Content(p, v)) {
			t.Fatalf("Content(%q, %d) is not deterministic", p, v)
		}
		if d := Decode(p, 0, c[:10], cands, Content); len(d.Versions) != len(cands) {
			t.Fatalf("Decode of a header's first bytes = %+v, want every version", d)
		}
		for _, r := range [][2]int64{{0, int64(len(c))}, {0, 30}, {100, 64}, {int64(len(c)) - 70, 70}} {
			d := Decode(p, r[0], c[r[0]:r[0]+r[1]], cands, Content)
			if d.Mixed || d.Unknown || !slices.Equal(d.Versions, []int{v}) {
				t.Fatalf("Decode of version %d bytes %v = %+v", v, r, d)
			}
		}
	}
	a, b := Content(p, 1), Content(p, 2)
	n := min(len(a), len(b))
	mix := append(append([]byte{}, a[:n/2]...), b[n/2:n]...)
	if d := Decode(p, 0, mix, cands, Content); !d.Mixed || !slices.Equal(d.Versions, []int{1, 2}) {
		t.Fatalf("Decode of a mix = %+v, want versions 1 then 2", d)
	}
	junk := bytes.Repeat([]byte{0x5a}, 500)
	if d := Decode(p, 0, junk, cands, Content); !d.Unknown {
		t.Fatalf("Decode of junk = %+v, want unknown", d)
	}
	if got := SizeVersions(p, Size(p, 3), cands); !slices.Contains(got, 3) {
		t.Fatalf("SizeVersions(size of 3) = %v", got)
	}
}
