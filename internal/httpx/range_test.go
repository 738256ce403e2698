package httpx

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		h    string
		size int64
		want []Range
		err  error
	}{
		{"", 100, nil, nil},
		{"bytes=0-9", 100, []Range{{0, 10}}, nil},
		{"bytes=90-", 100, []Range{{90, 10}}, nil},
		{"bytes=-5", 100, []Range{{95, 5}}, nil},
		{"bytes=-500", 100, []Range{{0, 100}}, nil},
		{"bytes=95-200", 100, []Range{{95, 5}}, nil},
		{"bytes=0-0, 10-19 ,-1", 100, []Range{{0, 1}, {10, 10}, {99, 1}}, nil},
		{"bytes=200-300,0-0", 100, []Range{{0, 1}}, nil},
		{"bytes=100-", 100, nil, ErrUnsatisfiable},
		{"bytes=0-", 0, nil, ErrUnsatisfiable},
		{"bytes=5-1", 100, nil, ErrBadRange},
		{"items=0-1", 100, nil, nil},
		{"BYTES=95-200", 100, []Range{{95, 5}}, nil},
		{" bytes=0-0 ", 100, []Range{{0, 1}}, nil},
		{"=0-1", 100, nil, ErrBadRange},
		{"bytes", 100, nil, ErrBadRange},
		{"by tes=0-1", 100, nil, ErrBadRange},
		{"bytes=a-b", 100, nil, ErrBadRange},
		{"bytes=", 100, nil, ErrBadRange},
	}
	for _, tt := range tests {
		got, err := ParseRange(tt.h, tt.size)
		if !errors.Is(err, tt.err) || !slices.Equal(got, tt.want) {
			t.Errorf("ParseRange(%q, %d) = %v, %v; want %v, %v", tt.h, tt.size, got, err, tt.want, tt.err)
		}
	}
	if got := (Range{10, 5}).ContentRange(100); got != "bytes 10-14/100" {
		t.Errorf("ContentRange = %q", got)
	}
}

func TestMetalinkRoundTrip(t *testing.T) {
	m := &Metalink{Generator: "lakefed", Files: []MetalinkFile{{
		Name: "f.root", Size: 42,
		Hashes: []MetalinkHash{{Type: "adler32", Value: "0a0b0c0d"}},
		URLs:   []MetalinkURL{{Priority: 1, URL: "http://a/f.root"}, {Priority: 2, URL: "http://b/f.root?x=1&y=2"}},
	}}}
	var buf bytes.Buffer
	if err := WriteMetalink(&buf, m); err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetalink(&buf)
	if err != nil {
		t.Fatal(err)
	}
	f := got.Files[0]
	if got.XMLName.Space != MetalinkNS || f.Name != "f.root" || f.Size != 42 || len(f.URLs) != 2 ||
		f.URLs[1].URL != "http://b/f.root?x=1&y=2" || f.Hashes[0].Value != "0a0b0c0d" {
		t.Errorf("round trip = %+v", got)
	}
}
