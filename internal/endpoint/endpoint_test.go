package endpoint

import (
	"testing"
	"time"
)

func TestSameBytes(t *testing.T) {
	mt := time.Unix(1700000000, 0)
	strong := Info{Size: 10, ModTime: mt, ETag: "a", Strong: true}
	with := func(f func(*Info)) Info { in := strong; f(&in); return in }
	tests := []struct {
		name      string
		want, got Info
		same      bool
	}{
		{"equal strong", strong, strong, true},
		{"size unknown to the reader", strong, with(func(in *Info) { in.Size = -1 }), true},
		{"weak described", with(func(in *Info) { in.Strong = false }), strong, false},
		{"weak read", strong, with(func(in *Info) { in.Strong = false }), false},
		{"other tag", strong, with(func(in *Info) { in.ETag = "b" }), false},
		{"no tag read", strong, with(func(in *Info) { in.ETag = "" }), false},
		{"no tag at all", with(func(in *Info) { in.ETag = "" }), with(func(in *Info) { in.ETag = "" }), false},
		{"other size", strong, with(func(in *Info) { in.Size = 11 }), false},
		{"other time", strong, with(func(in *Info) { in.ModTime = mt.Add(time.Second) }), false},
	}
	for _, tt := range tests {
		if got := SameBytes(tt.want, tt.got); got != tt.same {
			t.Errorf("%s: SameBytes(%+v, %+v) = %v, want %v", tt.name, tt.want, tt.got, got, tt.same)
		}
	}
}
