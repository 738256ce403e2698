package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// progress draws a one-line progress bar for a copy on a terminal. A nil
// *progress draws nothing, so callers need not check whether output is a
// terminal. Not safe for concurrent use: one copy drives it.
type progress struct {
	w        io.Writer
	total    int64 // bytes expected; < 0 when unknown
	n        int64
	begin    time.Time
	lastDraw time.Time
}

// progressEvery is how often the bar is redrawn at most.
const progressEvery = 200 * time.Millisecond

// newProgress returns a progress bar drawing on f when f is a terminal,
// else nil (quiet). golang.org/x/term is not a dependency; the TCGETS
// ioctl is what term.IsTerminal does on Linux.
func newProgress(f *os.File) *progress {
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return &progress{w: f}
}

// set records moved of total bytes (total < 0: unknown); moved 0 starts
// the clock again. It has transfer.Options.Progress's shape.
func (p *progress) set(moved, total int64) {
	if moved == 0 {
		p.begin = time.Now()
	}
	p.total, p.n = total, moved
	if now := time.Now(); now.Sub(p.lastDraw) >= progressEvery {
		p.lastDraw = now
		p.draw(now)
	}
}

// done draws the final state and ends the line.
func (p *progress) done(ok bool) {
	if p == nil {
		return
	}
	p.draw(time.Now())
	if ok {
		fmt.Fprintln(p.w)
	} else {
		fmt.Fprintln(p.w, " failed")
	}
}

func (p *progress) draw(now time.Time) {
	const width = 30
	rate := 0.0
	if d := now.Sub(p.begin).Seconds(); d > 0 {
		rate = float64(p.n) / d
	}
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%10s  %10s/s", byteSize(float64(p.n)), byteSize(rate))
		return
	}
	frac := min(float64(p.n)/float64(p.total), 1)
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	fmt.Fprintf(p.w, "\r[%s] %3.0f%%  %10s / %-10s %10s/s", bar, frac*100,
		byteSize(float64(p.n)), byteSize(float64(p.total)), byteSize(rate))
}

// byteSize formats a byte count in binary units ("12.3 MiB").
func byteSize(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", b, units[i])
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
