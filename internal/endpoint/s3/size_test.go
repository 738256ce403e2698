package s3

import "testing"

func TestSizeOption(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 7, true},
		{"1048576", 1 << 20, true},
		{"64MiB", 64 << 20, true},
		{"64mib", 64 << 20, true},
		{"5M", 5 << 20, true},
		{"100MB", 100_000_000, true},
		{"1.5GiB", 3 << 29, true},
		{" 2 KiB ", 2048, true},
		{"12B", 12, true},
		{"lots", 0, false},
		{"5XB", 0, false},
		{"-5MiB", 0, false},
		{"99999999TiB", 0, false},
	}
	for _, tt := range tests {
		got, err := sizeOption(tt.in, 7)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("sizeOption(%q) = %d, %v, want %d (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestPartSizeFor(t *testing.T) {
	e := &Endpoint{partSize: 64 << 20}
	tests := []struct{ size, want int64 }{
		{-1, 64 << 20},
		{6 << 30, 64 << 20},
		{64 << 20 * MaxParts, 64 << 20},
		{1 << 40, 105 << 20}, // 1 TiB / 10000 = 104.9 MiB, rounded up to whole MiB
	}
	for _, tt := range tests {
		if got := e.partSizeFor(tt.size); got != tt.want {
			t.Errorf("partSizeFor(%d) = %d, want %d", tt.size, got, tt.want)
		}
		if tt.size > 0 && e.partSizeFor(tt.size)*MaxParts < tt.size {
			t.Errorf("partSizeFor(%d) needs more than %d parts", tt.size, MaxParts)
		}
	}
}
