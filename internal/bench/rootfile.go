package bench

import (
	"fmt"
	"math"
	"math/rand/v2"

	"go-hep.org/x/hep/groot"
	"go-hep.org/x/hep/groot/rtree"
)

// The sample ROOT file's layout: what `bench root` reads by default and
// `lakefed demo` serves.
const (
	// SampleTree is the tree's name.
	SampleTree = "events"
	// SampleBranch is the jagged branch the ROOT test reads by default
	// (float32 transverse momenta of the jets of each event).
	SampleBranch = "jet_pt"
	// SampleEvents is prepare's default event count: a file of about
	// 10 MB with a few hundred baskets per jagged branch.
	SampleEvents = 200_000
)

// WriteSampleROOT writes a ROOT file at path holding the tree "events"
// with nEvents events of simulated jets: "njet" (int32), the jagged
// branches "jet_pt", "jet_eta" and "jet_phi" ([]float32, njet long) and
// "met" (float32). The same seed gives the same file. The baskets are
// small (8 KiB) so reading one branch takes many scattered reads, the
// pattern TTreeCache exists for.
func WriteSampleROOT(path string, nEvents int, seed uint64) error {
	if nEvents < 0 {
		return fmt.Errorf("bench: negative event count %d", nEvents)
	}
	f, err := groot.Create(path)
	if err != nil {
		return fmt.Errorf("bench: create %s: %w", path, err)
	}
	defer f.Close()
	var evt struct {
		NJet   int32
		JetPt  []float32
		JetEta []float32
		JetPhi []float32
		MET    float32
	}
	wvars := []rtree.WriteVar{
		{Name: "njet", Value: &evt.NJet},
		{Name: SampleBranch, Value: &evt.JetPt, Count: "njet"},
		{Name: "jet_eta", Value: &evt.JetEta, Count: "njet"},
		{Name: "jet_phi", Value: &evt.JetPhi, Count: "njet"},
		{Name: "met", Value: &evt.MET},
	}
	w, err := rtree.NewWriter(f, SampleTree, wvars, rtree.WithBasketSize(8<<10))
	if err != nil {
		return fmt.Errorf("bench: create tree in %s: %w", path, err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	for range nEvents {
		n := rng.IntN(10)
		evt.NJet = int32(n)
		evt.JetPt, evt.JetEta, evt.JetPhi = evt.JetPt[:0], evt.JetEta[:0], evt.JetPhi[:0]
		for range n {
			// A falling spectrum above 20 GeV, |eta| < 2.5.
			evt.JetPt = append(evt.JetPt, float32(20+rng.ExpFloat64()*30))
			evt.JetEta = append(evt.JetEta, float32(rng.Float64()*5-2.5))
			evt.JetPhi = append(evt.JetPhi, float32(rng.Float64()*2*math.Pi-math.Pi))
		}
		evt.MET = float32(rng.ExpFloat64() * 40)
		if _, err := w.Write(); err != nil {
			w.Close()
			return fmt.Errorf("bench: write event to %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("bench: close tree in %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: close %s: %w", path, err)
	}
	return nil
}
