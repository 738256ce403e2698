package httpx

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestParseRangeEdges pins the RFC 9110 §14.1.2 edge cases both the
// storage role and the federator rely on: a suffix of 0 and any range of
// an empty representation are unsatisfiable, and Ranges that would
// amplify the answer (overlapping, more bytes than the representation,
// more than MaxRanges) are ErrBadRange, which ServeContent refuses (416)
// in every role.
func TestParseRangeEdges(t *testing.T) {
	many := "bytes=" + strings.TrimSuffix(strings.Repeat("0-0,", MaxRanges+1), ",")
	spaced := "bytes=" + strings.TrimSuffix(strings.Repeat("1-1,", MaxRanges), ",")
	tests := []struct {
		name string
		h    string
		size int64
		want []Range
		err  error
	}{
		{"suffix zero", "bytes=-0", 100_000_000, nil, ErrUnsatisfiable},
		{"suffix zero among unsatisfiable", "bytes=-0,200-", 100, nil, ErrUnsatisfiable},
		{"suffix zero beside a good one", "bytes=-0,0-0", 100, []Range{{0, 1}}, nil},
		{"suffix on empty", "bytes=-5", 0, nil, ErrUnsatisfiable},
		{"open on empty", "bytes=0-", 0, nil, ErrUnsatisfiable},
		{"closed on empty", "bytes=0-0", 0, nil, ErrUnsatisfiable},
		{"overlapping", "bytes=0-,0-,0-", 100, nil, ErrBadRange},
		{"two overlapping", "bytes=0-10,5-20", 100, nil, ErrBadRange},
		{"sum over size", "bytes=0-59,40-99", 100, nil, ErrBadRange},
		{"more than MaxRanges", many, 1000, nil, ErrBadRange},
		{"MaxRanges of the same byte", spaced, 1000, nil, ErrBadRange},
		{"adjacent", "bytes=0-4,5-9", 100, []Range{{0, 5}, {5, 5}}, nil},
		{"disjoint out of order", "bytes=50-59,0-9", 100, []Range{{50, 10}, {0, 10}}, nil},
		{"huge number", "bytes=99999999999999999999-", 100, nil, ErrBadRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRange(tt.h, tt.size)
			if !errors.Is(err, tt.err) || !slices.Equal(got, tt.want) {
				t.Errorf("ParseRange(%.40q, %d) = %v, %v; want %v, %v", tt.h, tt.size, got, err, tt.want, tt.err)
			}
		})
	}
}
