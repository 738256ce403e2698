package demo

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/lakefed/lakefed/internal/bench"
)

// Sample is one file of the demo's namespace and the sites that hold a
// copy of it. The layout shows each thing a federator does: replicas on
// two sites (redirect to the best, fail over to the other), a file on one
// site only, a file only on the proxied site (the bytes come through the
// federator), and a directory tree whose listing is merged across sites.
type Sample struct {
	// Path is the file's path in the federated namespace (and on each
	// site that holds it).
	Path string
	// Sites name the sites holding a copy, best-ranked first.
	Sites []string
	// Size is the file's size in bytes; 0 for the ROOT file, whose size
	// groot decides.
	Size int64
	// What says in a few words why the file is there.
	What string
}

// The sample ROOT file.
const (
	// ROOTPath is where the sample ROOT file lives in the namespace.
	ROOTPath = "/demo/events.root"
	// ROOTTree and ROOTBranch name the tree and its jagged float32
	// branch (bench.SampleTree, bench.SampleBranch).
	ROOTTree   = bench.SampleTree
	ROOTBranch = bench.SampleBranch
	// DefaultEvents is the ROOT file's event count unless Options.Events
	// says otherwise: about 1 MB, written in well under a second.
	DefaultEvents = 20_000
	// ROOTSeed is the seed bench.WriteSampleROOT is given, so a test can
	// write the same file again and compare.
	ROOTSeed = 4
)

// Samples is the demo's data, in the order the help lists it.
var Samples = []Sample{
	{Path: "/demo/README.txt", Sites: []string{"site-a", "site-b"}, What: "replicated"},
	{Path: ROOTPath, Sites: []string{"site-a", "site-b"}, What: "ROOT file, jagged jet_pt, replicated"},
	{Path: "/demo/data/run1/hits-0001.dat", Sites: []string{"site-a", "site-b"}, Size: 1 << 20, What: "replicated"},
	{Path: "/demo/data/run1/hits-0002.dat", Sites: []string{"site-b", "site-c"}, Size: 1 << 20, What: "replicated"},
	{Path: "/demo/data/run2/calib.json", Sites: []string{"site-a"}, What: "one site only"},
	{Path: "/demo/data/run2/hits-0003.dat", Sites: []string{"site-c"}, Size: 256 << 10, What: "only on the proxied site"},
	{Path: "/demo/only-on-site-c.txt", Sites: []string{"site-c"}, What: "only on the proxied site"},
}

// readme is /demo/README.txt.
const readme = `This file is served by lakefed demo: a federator in front of three storage
sites on loopback. It has a copy on site-a and on site-b; the federator sent
you to the best live one (curl -L followed its 302).

Ask for the replicas:  curl -H 'Accept: application/metalink4+xml' URL
See why it chose one:  curl -sI -H 'X-Lakefed-Debug: 1' URL
`

// content returns the bytes of every sample except the ROOT file.
func content(s Sample, i int) io.Reader {
	switch {
	case s.Path == "/demo/README.txt":
		return strings.NewReader(readme)
	case strings.HasSuffix(s.Path, ".json"):
		return strings.NewReader(`{"run": 2, "detector": "demo", "gain": [1.02, 0.98, 1.01], "pedestal": 412}` + "\n")
	case strings.HasSuffix(s.Path, ".txt"):
		return strings.NewReader("This file exists only on site-c, which the federator proxies:\n" +
			"its bytes came through the federator, not by a redirect.\n")
	}
	var key [32]byte
	key[0] = byte(i)
	return io.LimitReader(rand.NewChaCha8(key), s.Size)
}

// writeSamples writes every sample into the directories of the sites that
// hold it. The ROOT file is written once with groot and copied.
func writeSamples(dirs map[string]string, events int) error {
	for i, s := range Samples {
		var first string
		for _, site := range s.Sites {
			dst := filepath.Join(dirs[site], filepath.FromSlash(s.Path))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fmt.Errorf("demo: sample data: %w", err)
			}
			var err error
			switch {
			case first != "":
				err = copyFile(first, dst)
			case s.Path == ROOTPath:
				err = bench.WriteSampleROOT(dst, events, ROOTSeed)
			default:
				err = writeFile(dst, content(s, i))
			}
			if err != nil {
				return fmt.Errorf("demo: sample data: %w", err)
			}
			first = dst
		}
	}
	return nil
}

func writeFile(dst string, r io.Reader) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(dst, f)
}

// BufferPrefix is where the demo's write buffer takes PUTs: they are
// acknowledged from local disk and migrate to site-a and site-b.
const BufferPrefix = "/demo/out"
