package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"path"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// fileSet is a list of test files of one size under one directory.
type fileSet struct {
	dir   string
	paths []string
	urls  []*url.URL // nil for targets without HTTP
	size  int64
	fresh bool // written for this run: removed after it unless Keep
}

func fileName(prefix string, i int) string { return fmt.Sprintf("%s%05d", prefix, i) }

// newFileSet names n files dir/prefixNNNNN of the given size on t.
func (t *Target) newFileSet(dir, prefix string, n int, size int64, fresh bool) *fileSet {
	fs := &fileSet{dir: dir, size: size, fresh: fresh}
	for i := range n {
		p := path.Join(dir, fileName(prefix, i))
		fs.paths = append(fs.paths, p)
		if t.base != nil {
			fs.urls = append(fs.urls, t.fileURL(p))
		}
	}
	return fs
}

func (fs *fileSet) url(i int) *url.URL {
	if fs.urls == nil {
		return nil
	}
	return fs.urls[i]
}

// randReader returns size random bytes from seed, the same bytes every
// time: a body a redirected PUT can send again.
func randReader(seed uint64, size int64) io.Reader {
	var key [32]byte
	for i := range 4 {
		s := seed + uint64(i)*0x9e3779b97f4a7c15
		for b := range 8 {
			key[i*8+b] = byte(s >> (8 * b))
		}
	}
	return io.LimitReader(rand.NewChaCha8(key), size)
}

// writeFiles writes the files of fs with random content, a few at a time,
// reporting progress as "what: k/n".
func (t *Target) writeFiles(ctx context.Context, fs *fileSet, seed uint64, what string, p Progress) error {
	var done atomic.Int64
	stop := showProgress(p, func() string {
		return fmt.Sprintf("%s: writing test files %d/%d", what, done.Load(), len(fs.paths))
	})
	defer stop()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, p := range fs.paths {
		s := seed + uint64(i)
		g.Go(func() error {
			err := t.put(ctx, p, randReader(s, fs.size), fs.size, func() io.Reader { return randReader(s, fs.size) })
			if err != nil {
				return fmt.Errorf("bench: writing test files: %w", err)
			}
			done.Add(1)
			return nil
		})
	}
	return g.Wait()
}

// removeFiles removes the files of a fresh set, then its directory
// (Root/runs/<tag>) when that is left empty (best effort: leftovers only
// cost space under Root/runs). It returns the first error.
func (t *Target) removeFiles(ctx context.Context, fs *fileSet) error {
	var (
		mu    sync.Mutex
		first error
	)
	// gctx ends with Wait; the directory is removed after.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, p := range fs.paths {
		g.Go(func() error {
			if err := t.remove(gctx, p); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if first != nil {
		return first
	}
	return t.removeEmptyDir(ctx, fs.dir)
}

// Manifest describes the file sets `lakefed bench prepare` wrote under
// Root; tests run with Common.Reuse read it to find them.
type Manifest struct {
	// OpenFiles files of OpenSize bytes in Root/open (open test).
	OpenFiles int   `json:"open_files"`
	OpenSize  int64 `json:"open_size"`
	// ReadFiles files of ReadSize bytes in Root/read (read test).
	ReadFiles int   `json:"read_files"`
	ReadSize  int64 `json:"read_size"`
	// ROOTFile is the sample ROOT file's path, with ROOTEvents events.
	ROOTFile   string `json:"root_file"`
	ROOTEvents int    `json:"root_events"`
	// IOSize is the size of Root/io.dat (0: not written).
	IOSize int64 `json:"io_size,omitempty"`
}

// ManifestPath is where prepare leaves the manifest.
const ManifestPath = Root + "/manifest.json"

// manifest reads the manifest prepare wrote on t.
func (t *Target) manifest(ctx context.Context) (*Manifest, error) {
	rc, _, _, err := t.get(ctx, ManifestPath)
	if err != nil {
		return nil, fmt.Errorf("bench: no prepared files (run 'lakefed bench prepare %s' first): %w", t.raw, err)
	}
	defer rc.Close()
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("bench: bad manifest %s: %w", ManifestPath, err)
	}
	return &m, nil
}
