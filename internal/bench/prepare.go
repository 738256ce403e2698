package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// PrepareOptions say which test files `lakefed bench prepare` writes.
type PrepareOptions struct {
	Common
	// OpenFiles files of OpenSize bytes for the open test (0: 1000 of
	// 4096 bytes; negative: none).
	OpenFiles int
	OpenSize  int64
	// ReadFiles files of ReadSize bytes for the read test (0: 100 of
	// 20 MiB, 8 blocks of 2.5 MiB; negative: none).
	ReadFiles int
	ReadSize  int64
	// ROOTEvents events in the sample ROOT file (0: SampleEvents;
	// negative: no ROOT file).
	ROOTEvents int
}

// Prepare writes the file sets the tests use with Common.Reuse, the
// sample ROOT file, and the manifest that lists them, under Root on t —
// the special path and file list the AAA tests asked sites to provide,
// made by one command.
func Prepare(ctx context.Context, t *Target, o PrepareOptions) (*Manifest, error) {
	if o.OpenFiles == 0 {
		o.OpenFiles = 1000
	}
	if o.OpenSize <= 0 {
		o.OpenSize = 4096
	}
	if o.ReadFiles == 0 {
		o.ReadFiles = 100
	}
	if o.ReadSize <= 0 {
		o.ReadSize = 8 * (5 << 19)
	}
	if o.ROOTEvents == 0 {
		o.ROOTEvents = SampleEvents
	}
	rng := o.rng()
	m := &Manifest{}
	if o.OpenFiles > 0 {
		fs := t.newFileSet(Root+"/open", "f", o.OpenFiles, o.OpenSize, false)
		if err := t.writeFiles(ctx, fs, rng.Uint64(), "prepare open", o.Progress); err != nil {
			return nil, err
		}
		m.OpenFiles, m.OpenSize = o.OpenFiles, o.OpenSize
	}
	if o.ReadFiles > 0 {
		fs := t.newFileSet(Root+"/read", "r", o.ReadFiles, o.ReadSize, false)
		if err := t.writeFiles(ctx, fs, rng.Uint64(), "prepare read", o.Progress); err != nil {
			return nil, err
		}
		m.ReadFiles, m.ReadSize = o.ReadFiles, o.ReadSize
	}
	if o.ROOTEvents > 0 {
		if err := t.putSampleROOT(ctx, SamplePath, o.ROOTEvents, rng.Uint64()); err != nil {
			return nil, err
		}
		m.ROOTFile, m.ROOTEvents = SamplePath, o.ROOTEvents
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bench: manifest: %w", err)
	}
	if err := t.putBytes(ctx, ManifestPath, append(b, '\n')); err != nil {
		return nil, fmt.Errorf("bench: write manifest: %w", err)
	}
	return m, nil
}

// putSampleROOT writes a sample ROOT file (WriteSampleROOT) to p on t.
func (t *Target) putSampleROOT(ctx context.Context, p string, events int, seed uint64) error {
	dir, err := os.MkdirTemp("", "lakefed-root-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "sample.root")
	if err := WriteSampleROOT(local, events, seed); err != nil {
		return err
	}
	b, err := os.ReadFile(local)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := t.putBytes(ctx, p, b); err != nil {
		return fmt.Errorf("bench: write %s: %w", p, err)
	}
	return nil
}
