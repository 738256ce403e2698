package cache

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// purgeInterval is how often the purger looks at the bounds even when no
// fill asked it to (blocks dropped, a bound changed).
const purgeInterval = 30 * time.Second

// purger runs purge whenever a fill passes a high watermark, until the
// cache closes.
func (c *Cache) purger() {
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.purgec:
		case <-t.C:
		}
		c.purge()
	}
}

// wantPurge asks the purger to run.
func (c *Cache) wantPurge() {
	select {
	case c.purgec <- struct{}{}:
	default:
	}
}

// purge removes least recently used whole files while the bytes or the
// inodes are above their high watermark, until both are below the low
// one. A file being read (pinned) is left in place: its reader would
// otherwise lose the blocks it is reading (Pelican purges by bytes only
// and filled its disks with inodes; both bounds count here).
func (c *Cache) purge() {
	hi, lo := c.cfg.HighWatermark, c.cfg.LowWatermark
	// The file system counts too: other files on it, or bounds set above
	// its size, fill it before the cache's own bytes pass their mark, and
	// then every fill fails with ENOSPC and nothing is ever cached again.
	diskFull := func(frac float64) bool {
		free, total, err := fsFree(c.cfg.Dir)
		return err == nil && total > 0 && float64(free) < (1-frac)*float64(total)
	}
	u := c.usage()
	overBytes := float64(u.Bytes) > hi*float64(c.cfg.MaxBytes)
	overInodes := float64(u.Inodes) > hi*float64(c.cfg.MaxInodes)
	overDisk := diskFull(hi)
	if !overBytes && !overInodes && !overDisk {
		return
	}
	type cand struct {
		f    *file
		used time.Time
	}
	var cands []cand
	for _, f := range c.list() {
		f.mu.Lock()
		cands = append(cands, cand{f, f.lastUse})
		f.mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.used.Compare(b.used) })
	reason := "bytes"
	switch {
	case overBytes:
	case overInodes:
		reason = "inodes"
	default:
		reason = "disk"
	}
	for _, cd := range cands {
		u = c.usage()
		if float64(u.Bytes) <= lo*float64(c.cfg.MaxBytes) && float64(u.Inodes) <= lo*float64(c.cfg.MaxInodes) && !diskFull(lo) {
			return
		}
		if c.remove(cd.f, true) {
			c.m.evictions.WithLabelValues(reason).Inc()
		}
	}
}

// fsSize returns the size in bytes and the inodes of the file system
// holding dir.
func fsSize(dir string) (bytes, inodes int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Files), nil
}

// fsFree returns the bytes free (to unprivileged users) and the size of
// the file system holding dir.
func fsFree(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
