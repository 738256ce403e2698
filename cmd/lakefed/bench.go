package main

// The bench command: the site and scale tests of internal/bench, their
// results store (internal/results) and its queries. Wiring only.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lakefed/lakefed/internal/bench"
	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/endpoint/kinds"
	"github.com/lakefed/lakefed/internal/logging"
	"github.com/lakefed/lakefed/internal/results"
)

// benchCommands are bench's own subcommands, in the order -h lists them.
var benchCommands = []struct {
	name, args, summary string
	run                 func(ctx context.Context, stdout io.Writer, args []string) error
}{
	{"io", "URL", "write a file of random bytes, read it back, time both, verify adler32", benchIO},
	{"open", "URL", "open-rate test: N jobs each opening a file every 0.5 s, ramped (CMS AAA)", benchOpen},
	{"read", "URL", "read-rate test: N jobs each reading 2.5 MiB every 10 s, ramped (CMS AAA)", benchRead},
	{"root", "URL", "read one branch of a ROOT file; I/O pattern with and without prefetch", benchROOT},
	{"agent", "", "run the jobs of open and read tests handed out through --queue (a worker node)", benchAgent},
	{"prepare", "URL", "write the test files a site needs (file lists, a ROOT file)", benchPrepare},
	{"list", "", "list stored runs, newest first", benchList},
	{"show", "ID", "show a stored run with its stages", benchShow},
	{"compare", "ID ID...", "show stored runs side by side", benchCompare},
	{"export", "ID", "write a run with its samples as csv or json", benchExport},
}

func runBench(ctx context.Context, args []string) error {
	return benchMain(ctx, os.Stdout, args)
}

// benchMain is runBench with its output made explicit for tests.
func benchMain(ctx context.Context, stdout io.Writer, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		benchUsage(os.Stderr)
		if len(args) == 0 {
			return usageErrorf("bench: want a subcommand")
		}
		return flag.ErrHelp
	}
	for _, c := range benchCommands {
		if c.name == args[0] {
			return c.run(ctx, stdout, args[1:])
		}
	}
	return usageErrorf("bench: unknown subcommand %q (see 'lakefed bench -h')", args[0])
}

func benchUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: lakefed bench COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nSite and scale tests against any URL lakefed reads; every run is kept in a")
	fmt.Fprintln(w, "results store: a SQLite file or a postgres:// URL (--db, $LAKEFED_BENCH_DB,")
	fmt.Fprintln(w, "default "+results.DefaultPath()+").")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range benchCommands {
		fmt.Fprintf(w, "  %-8s %-9s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\n'lakefed bench COMMAND -h' shows a command's flags.")
}

// benchFlags are the flags every test takes.
type benchFlags struct {
	cf       clientFlags
	db       string
	queue    string
	rec      *runRecord // the run's record, once begun
	noStore  bool
	jsonOut  bool
	speed    float64
	site     string
	seed     uint64
	reuse    bool
	keep     bool
	label    string
	maxConns int
	th       bench.Thresholds
}

func (bf *benchFlags) register(fs *flag.FlagSet, classified bool) {
	bf.cf.register(fs)
	if classified { // the paced tests, whose jobs agents can run
		fs.StringVar(&bf.queue, "queue", "", "hand the jobs out to bench agents through this Redis `URL` (redis://HOST:PORT/DB);\nthe agents write their samples into the same results store (--db, a postgres:// URL)")
	}
	fs.StringVar(&bf.db, "db", "", "results database: a SQLite `path` or a postgres:// URL (default $LAKEFED_BENCH_DB or "+results.DefaultPath()+")")
	fs.BoolVar(&bf.noStore, "no-store", false, "do not record the run in the results store")
	fs.BoolVar(&bf.jsonOut, "json", false, "print the result as JSON instead of a table")
	fs.Float64Var(&bf.speed, "speed", 1, "divide every period and duration by this `factor` (rates rise by it)")
	fs.StringVar(&bf.site, "site", "", "pin every request to this federator site (adds ?"+bench.SiteParam+"=NAME)")
	fs.Uint64Var(&bf.seed, "seed", 0, "seed for file names, data and schedules (0: random)")
	fs.BoolVar(&bf.reuse, "reuse", false, "use the files 'bench prepare' wrote instead of a fresh set (caches may bias the result)")
	fs.BoolVar(&bf.keep, "keep", false, "keep the run's fresh test files")
	fs.StringVar(&bf.label, "label", "", "a note stored with the run")
	fs.IntVar(&bf.maxConns, "max-conns", 0, "connections to the target at most (0: 1024)")
	bf.th = bench.DefaultThresholds()
	if classified {
		fs.Float64Var(&bf.th.MinOpenRate, "min-open-rate", bf.th.MinOpenRate, "open test: \"to debug\" under this rate (Hz, unscaled)")
		fs.Float64Var(&bf.th.MaxOpenFailFrac, "max-fail", bf.th.MaxOpenFailFrac, "\"to debug\" above this fraction of failed operations")
		fs.Float64Var(&bf.th.MinOpenSlope, "min-slope", bf.th.MinOpenSlope, "open test: \"trend is flat\" when observed/expected slope is under this")
		fs.DurationVar(&bf.th.MaxBlockTime, "max-block-time", bf.th.MaxBlockTime, "read test: \"to debug\" when the mean block read time exceeds this (unscaled)")
	}
}

func (bf *benchFlags) common(p bench.Progress) bench.Common {
	return bench.Common{Speed: bf.speed, Seed: bf.seed, Reuse: bf.reuse, Keep: bf.keep, Progress: p}
}

// parseAndRun is the whole of a test subcommand once its flags are
// registered: parse args, take the one URL, build the target and run the
// test on it with runOne.
func (bf *benchFlags) parseAndRun(ctx context.Context, stdout io.Writer, fs *flag.FlagSet, args []string, kind string,
	params any, test func(*bench.Target, bench.Common) (*bench.Result, error)) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := oneURL(fs, kind)
	if err != nil {
		return err
	}
	t, err := bf.target(ctx, u)
	if err != nil {
		return err
	}
	defer t.Close()
	return bf.runOne(ctx, stdout, kind, u, params, func(c bench.Common) (*bench.Result, error) { return test(t, c) })
}

// runOne runs one test with a fresh progress display, recording it in the
// store from its start (status running, so that 'bench show' sees it),
// then prints its result and records it as done, or interrupted (SIGINT)
// with the samples it has, or failed. params is what the run is stored
// with (the test's options, read again after test has filled them).
func (bf *benchFlags) runOne(ctx context.Context, stdout io.Writer, kind, target string, params any,
	test func(bench.Common) (*bench.Result, error)) error {
	rec, err := bf.begin(ctx, kind, target, params)
	if err != nil {
		return err
	}
	defer rec.close()
	bf.rec = rec
	res, err := test(bf.common(newBenchProgress(os.Stderr)))
	if err != nil {
		// The run's own error is what the user needs; a store that
		// cannot record it costs the record only.
		_ = rec.fail(ctx, err)
		return err
	}
	return bf.finish(ctx, stdout, rec, res)
}

// storeWriteTimeout bounds a write of a run's record once the run is
// over, which SIGINT does not cancel: long enough for millions of
// samples, short enough that a locked database cannot hang the command.
const storeWriteTimeout = 30 * time.Second

// storeCtx is the context of a store write: not cancelled by SIGINT (an
// interrupted run must still be recorded), but bounded.
func storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
}

// runRecord is a run's row in the results store; nil with --no-store.
type runRecord struct {
	st *results.Store
	id int64
}

// begin opens the store and records the run as running.
func (bf *benchFlags) begin(ctx context.Context, kind, target string, params any) (*runRecord, error) {
	if bf.noStore {
		return nil, nil
	}
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	st, err := bf.openStore(sctx)
	if err != nil {
		return nil, err
	}
	id, err := bench.Begin(sctx, st, kind, target, bf.site, params, time.Now(), bf.label)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &runRecord{st: st, id: id}, nil
}

// finishRun records res (done or interrupted) and its verdict.
func (r *runRecord) finishRun(ctx context.Context, res *bench.Result, v bench.Verdict) error {
	if r == nil {
		return nil
	}
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	return bench.Record(sctx, r.st, r.id, res, v)
}

// fail records a run that could not complete: interrupted when ctx was
// (the error is then the interruption's), else failed.
func (r *runRecord) fail(ctx context.Context, runErr error) error {
	if r == nil {
		return nil
	}
	sctx, cancel := storeCtx(ctx)
	defer cancel()
	return bench.RecordFailure(sctx, r.st, r.id, runErr, ctx.Err() != nil)
}

func (r *runRecord) close() {
	if r != nil {
		r.st.Close()
	}
}

// target builds the bench target for URL: lean HTTP for http(s), the
// endpoint layer (kinds.New) for the other schemes and for writes.
func (bf *benchFlags) target(ctx context.Context, rawURL string) (*bench.Target, error) {
	if bf.speed <= 0 {
		return nil, usageErrorf("bench: --speed must be positive")
	}
	t, err := bench.NewTarget(ctx, bench.TargetConfig{
		URL: rawURL, Site: bf.site, Timeout: bf.cf.timeout, CAFile: bf.cf.caFile,
		InsecureSkipVerify: bf.cf.insecure, BearerToken: os.Getenv("BEARER_TOKEN"), MaxConns: bf.maxConns,
		NewEndpoint: func(ctx context.Context, cfg endpoint.Config) (endpoint.Endpoint, error) {
			if strings.HasPrefix(strings.ToLower(cfg.URL), "s3://") {
				cfg.S3 = s3FromEnv()
			}
			return kinds.New(ctx, cfg, discardLogger())
		},
	})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return t, nil
}

func (bf *benchFlags) openStore(ctx context.Context) (*results.Store, error) {
	return openStoreAt(ctx, bf.db)
}

// finish classifies res, records it in rec and prints it. An
// interrupted run is printed and recorded too, and then reported as the
// interruption it was.
func (bf *benchFlags) finish(ctx context.Context, stdout io.Writer, rec *runRecord, res *bench.Result) error {
	bf.th.MaxReadFailFrac = bf.th.MaxOpenFailFrac // --max-fail is for both tests
	v := bench.Classify(res, bf.th)
	if err := rec.finishRun(ctx, res, v); err != nil {
		return err
	}
	var id int64
	if rec != nil {
		id = rec.id
	}
	if bf.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			ID int64 `json:"id,omitempty"`
			*bench.Result
			Verdict bench.Verdict `json:"verdict"`
		}{id, res, v}); err != nil {
			return err
		}
	} else {
		if id != 0 {
			fmt.Fprintf(stdout, "run %d\n", id)
		}
		if err := bench.WriteSummary(stdout, res, v); err != nil {
			return err
		}
	}
	if res.Canceled {
		return fmt.Errorf("bench %s: interrupted: %w", res.Kind, context.Cause(ctx))
	}
	return nil
}

// announce tells, on stderr, what the run about to start will cost, so
// that a 6-minute or 1 GiB run is not a surprise (and can be stopped at
// once with ^C).
func announce(p bench.Plan) {
	fmt.Fprintf(os.Stderr, "bench %s\n", p)
}

func oneURL(fs *flag.FlagSet, cmd string) (string, error) {
	if fs.NArg() != 1 {
		return "", usageErrorf("bench %s: want one URL, got %d arguments", cmd, fs.NArg())
	}
	return fs.Arg(0), nil
}

// sizeFlag is a flag.Value for sizes written "2.5MiB", "1GiB", "4096".
type sizeFlag struct{ n *int64 }

func (s sizeFlag) String() string {
	if s.n == nil {
		return "0"
	}
	return formatSize(*s.n)
}

// formatSize writes n as -h shows a default and sizeFlag parses it back:
// "1GiB", "2.5MiB", "4KiB", "1000".
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && (n*10)%u.size == 0 {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (s sizeFlag) Set(v string) error {
	n, err := config.ParseSize(v)
	if err != nil {
		return err
	}
	*s.n = n
	return nil
}

// rampFlags are the ramp flags of the paced tests.
func rampFlags(fs *flag.FlagSet, r *bench.Ramp, period *time.Duration) {
	fs.IntVar(&r.Jobs, "jobs", r.Jobs, "jobs at full load")
	fs.IntVar(&r.Step, "ramp-step", r.Step, "jobs added at each stage (0: all at once)")
	fs.DurationVar(&r.Every, "ramp-every", r.Every, "length of each ramp stage (unscaled)")
	fs.DurationVar(&r.Hold, "hold", r.Hold, "how long the full load is held (unscaled)")
	fs.DurationVar(period, "period", *period, "each job's period (unscaled)")
}

const benchURLHelp = `
URL is the base directory of the test files (they go under URL` + bench.Root + `):
http(s)://, dav(s)://, file:///, root://, ... A federator pinned to one site:
--site NAME.

Flags:`

func benchOpen(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench open", "URL\n\nOpen-rate test (CMS AAA): jobs each opening (stat + first byte, one ranged GET)\na different file every period, ramped; observed against expected rate, failure\nfraction, open-time percentiles. \"to debug\" when the rate stays under 10 Hz,\nthe trend is flat or more than 6 % fail.\n\nWith the defaults: "+bench.OpenDefaults().Plan().String()+".\n"+benchURLHelp)
	var bf benchFlags
	bf.register(fs, true)
	o := bench.OpenDefaults()
	rampFlags(fs, &o.Ramp, &o.Period)
	fs.IntVar(&o.Files, "files", o.Files, "files in the fresh file list")
	fs.Var(sizeFlag{&o.FileSize}, "file-size", "`size` of each fresh file (e.g. 4KiB)")
	return bf.parseAndRun(ctx, stdout, fs, args, "open", &o, func(t *bench.Target, c bench.Common) (*bench.Result, error) {
		o.Common = c
		announce(o.Plan())
		if bf.queue != "" {
			return bf.onAgents(ctx, t, o, func() (*bench.PacedTest, func(), error) { return bench.PrepareOpen(ctx, t, &o) })
		}
		return bench.Open(ctx, t, o)
	})
}

func benchRead(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench read", "URL\n\nRead-rate test (CMS AAA): jobs each reading a block every period from its own\nfile (or as --vector ranges in one multi-range request), ramped; block read time,\ntotal rate against jobs, time waiting for I/O. \"to debug\" when fewer than the\ntarget jobs are sustained or the mean block read time exceeds 5 s.\n\nWith the defaults: "+bench.ReadDefaults().Plan().String()+".\n"+benchURLHelp)
	var bf benchFlags
	bf.register(fs, true)
	o := bench.ReadDefaults()
	rampFlags(fs, &o.Ramp, &o.Period)
	fs.Var(sizeFlag{&o.Block}, "block", "`size` each read moves (e.g. 2.5MiB)")
	fs.IntVar(&o.Vector, "vector", 0, "split each block into this many ranges in one multi-range request")
	fs.IntVar(&o.Files, "files", 0, "files in the fresh set (0: one per job, at most 100)")
	fs.Var(sizeFlag{&o.FileSize}, "file-size", "`size` of each fresh file (0: 8 blocks)")
	fs.IntVar(&o.TargetJobs, "target-jobs", 0, "jobs that must be sustained for \"ok\" (0: --jobs)")
	return bf.parseAndRun(ctx, stdout, fs, args, "read", &o, func(t *bench.Target, c bench.Common) (*bench.Result, error) {
		o.Common = c
		announce(o.Plan())
		if bf.queue != "" {
			return bf.onAgents(ctx, t, o, func() (*bench.PacedTest, func(), error) { return bench.PrepareRead(ctx, t, &o) })
		}
		return bench.Read(ctx, t, o)
	})
}

func benchIO(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench io", "URL\n\nIO test (the Dynafed study's): writes a file of random bytes, reads it back,\ntimes both and verifies the adler32 (and the server's, when it gives one).\n\nWith the defaults: "+bench.IOOptions{}.Plan().String()+".\n"+benchURLHelp)
	var bf benchFlags
	bf.register(fs, false)
	o := bench.IOOptions{Size: bench.DefaultIOSize}
	fs.Var(sizeFlag{&o.Size}, "size", "file `size` (e.g. 1GiB)")
	return bf.parseAndRun(ctx, stdout, fs, args, "io", &o, func(t *bench.Target, c bench.Common) (*bench.Result, error) {
		o.Common = c
		announce(o.Plan())
		return bench.IO(ctx, t, o)
	})
}

func benchROOT(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench root", "URL\n\nROOT test: opens a ROOT file over HTTP through a counting ranged reader and\nreads one branch through; time to open and read, and the I/O pattern (requests,\nmedian and mean size, bytes read against file size), without and with a\nprefetch that gathers the branch's baskets into multi-range requests (as\nTTreeCache does). URL is the file, or a base where 'bench prepare' wrote one.\n"+benchURLHelp)
	var bf benchFlags
	bf.register(fs, false)
	var o bench.ROOTOptions
	fs.StringVar(&o.Tree, "tree", bench.SampleTree, "tree to read")
	fs.StringVar(&o.Branch, "branch", bench.SampleBranch, "branch to read")
	prefetch := fs.String("prefetch", "both", "off, on, or both (two runs)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := oneURL(fs, "root")
	if err != nil {
		return err
	}
	var modes []bool
	switch *prefetch {
	case "off":
		modes = []bool{false}
	case "on":
		modes = []bool{true}
	case "both":
		modes = []bool{false, true}
	default:
		return usageErrorf("bench root: --prefetch %q: want off, on or both", *prefetch)
	}
	base := u
	if strings.HasSuffix(strings.ToLower(u), ".root") {
		// A file URL: the base is its directory.
		i := strings.LastIndex(u, "/")
		base, o.File = u[:i+1], "/"+u[i+1:]
	}
	t, err := bf.target(ctx, base)
	if err != nil {
		return err
	}
	defer t.Close()
	for i, pf := range modes {
		o.Prefetch = pf
		if i > 0 && !bf.jsonOut {
			fmt.Fprintln(stdout)
		}
		err := bf.runOne(ctx, stdout, "root", u, &o, func(c bench.Common) (*bench.Result, error) {
			o.Common = c
			return bench.ROOT(ctx, t, o)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func benchPrepare(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench prepare", "URL\n\nWrites the test files the tests use with --reuse under URL"+bench.Root+": the\nopen test's file list, the read test's files, the sample ROOT file, and a\nmanifest naming them. A negative count skips a set.\n"+benchURLHelp)
	var bf benchFlags
	bf.register(fs, false)
	var o bench.PrepareOptions
	fs.IntVar(&o.OpenFiles, "open-files", 1000, "files for the open test")
	o.OpenSize = 4096
	fs.Var(sizeFlag{&o.OpenSize}, "open-size", "`size` of each open-test file")
	fs.IntVar(&o.ReadFiles, "read-files", 100, "files for the read test")
	o.ReadSize = 20 << 20
	fs.Var(sizeFlag{&o.ReadSize}, "read-size", "`size` of each read-test file")
	fs.IntVar(&o.ROOTEvents, "root-events", bench.SampleEvents, "events in the sample ROOT file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	u, err := oneURL(fs, "prepare")
	if err != nil {
		return err
	}
	t, err := bf.target(ctx, u)
	if err != nil {
		return err
	}
	defer t.Close()
	o.Common = bf.common(newBenchProgress(os.Stderr))
	m, err := bench.Prepare(ctx, t, o)
	if err != nil {
		return err
	}
	if bf.jsonOut {
		return json.NewEncoder(stdout).Encode(m)
	}
	fmt.Fprintf(stdout, "wrote %d open files of %d B, %d read files of %d B, %s (%d events) and %s under %s\n",
		m.OpenFiles, m.OpenSize, m.ReadFiles, m.ReadSize, orNone(m.ROOTFile), m.ROOTEvents, bench.ManifestPath, u)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no ROOT file"
	}
	return s
}

// storeFlags are the flags of the store commands.
func storeFlags(fs *flag.FlagSet) *string {
	return fs.String("db", "", "results database: a SQLite `path` or a postgres:// URL (default $LAKEFED_BENCH_DB or "+results.DefaultPath()+")")
}

func openStoreAt(ctx context.Context, p string) (*results.Store, error) {
	if p == "" {
		p = results.DefaultPath()
	}
	return results.Open(ctx, p)
}

func benchList(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench list", "\n\nLists stored runs, newest first: the runs of lakefed bench. The scheduled\nfunctional tests of 'lakefed serve' store theirs in the same place, one per\nendpoint a minute; --kind functional lists those, --all every run.\n\nFlags:")
	db := storeFlags(fs)
	var f results.Filter
	fs.StringVar(&f.Kind, "kind", "", "only runs of this test (io, open, read, root, "+results.KindFunctional+")")
	fs.StringVar(&f.Site, "site", "", "only runs at this site")
	fs.IntVar(&f.Limit, "n", 50, "at most this many runs")
	all := fs.Bool("all", false, "every run, the scheduled functional tests' too")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("bench list: takes no arguments")
	}
	if *all && f.Kind != "" {
		return usageErrorf("bench list: --all and --kind exclude each other")
	}
	if !*all && f.Kind == "" {
		f.ExceptKind = results.KindFunctional
	}
	st, err := openStoreAt(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.List(ctx, f)
	if err != nil {
		return err
	}
	if *jsonOut {
		if runs == nil {
			runs = []results.Run{}
		}
		return json.NewEncoder(stdout).Encode(runs)
	}
	return bench.WriteList(stdout, runs)
}

func parseIDs(fs *flag.FlagSet, cmd string, min, max int) ([]int64, error) {
	if fs.NArg() < min || (max > 0 && fs.NArg() > max) {
		return nil, usageErrorf("bench %s: wrong number of run IDs (%d)", cmd, fs.NArg())
	}
	var ids []int64
	for _, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id <= 0 {
			return nil, usageErrorf("bench %s: bad run ID %q", cmd, a)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// notFound turns the store's "no such run" into the not-found exit code.
func notFound(err error) error {
	if errors.Is(err, results.ErrNotFound) {
		return fmt.Errorf("%w: %w", err, endpoint.ErrNotFound)
	}
	return err
}

func benchShow(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench show", "ID\n\nShows a stored run: parameters, figures, classification and stages.\n\nFlags:")
	db := storeFlags(fs)
	jsonOut := fs.Bool("json", false, "print JSON (the run and its stages)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := parseIDs(fs, "show", 1, 1)
	if err != nil {
		return err
	}
	st, err := openStoreAt(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := st.Get(ctx, ids[0])
	if err != nil {
		return notFound(err)
	}
	steps, err := st.Steps(ctx, run.ID)
	if err != nil {
		return err
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(struct {
			Run   results.Run    `json:"run"`
			Steps []results.Step `json:"steps"`
		}{run, steps})
	}
	return bench.WriteRun(stdout, run, steps)
}

func benchCompare(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench compare", "ID ID...\n\nShows stored runs side by side.\n\nFlags:")
	db := storeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := parseIDs(fs, "compare", 2, 0)
	if err != nil {
		return err
	}
	st, err := openStoreAt(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	var runs []results.Run
	for _, id := range ids {
		r, err := st.Get(ctx, id)
		if err != nil {
			return notFound(err)
		}
		runs = append(runs, r)
	}
	return bench.WriteCompare(stdout, runs)
}

func benchExport(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench export", "ID\n\nWrites a run: json (run, stages and samples) or csv (one row per sample).\n\nFlags:")
	db := storeFlags(fs)
	format := fs.String("format", "json", "csv or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ids, err := parseIDs(fs, "export", 1, 1)
	if err != nil {
		return err
	}
	if *format != "csv" && *format != "json" {
		return usageErrorf("bench export: --format %q: want csv or json", *format)
	}
	st, err := openStoreAt(ctx, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	return notFound(bench.Export(ctx, st, ids[0], *format, stdout))
}

// benchProgress shows a test's progress line on a terminal.
type benchProgress struct {
	mu    sync.Mutex // guards w and drawn
	w     io.Writer
	drawn bool
}

// newBenchProgress returns a progress display on f when f is a terminal,
// else nil (no display).
func newBenchProgress(f *os.File) bench.Progress {
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return nil
	}
	return &benchProgress{w: f}
}

func (p *benchProgress) Update(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	p.drawn = true
}

func (p *benchProgress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// onAgents runs a paced test from the bench agents taking the jobs off
// --queue: prepare makes it ready (its files written), then its jobs are
// handed out and the run finished from the samples the agents stored.
// params are the test's options, read once prepare has filled them.
func (bf *benchFlags) onAgents(ctx context.Context, t *bench.Target, params any,
	prepare func() (*bench.PacedTest, func(), error)) (*bench.Result, error) {
	if bf.rec == nil {
		return nil, usageErrorf("bench: --queue needs the results store the agents write to (not --no-store)")
	}
	q, err := bench.OpenQueue(ctx, bf.queue)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	p, cleanup, err := prepare()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(os.Stderr, "handing %d jobs out to the agents on %s; run %d\n", p.Jobs(), bf.queue, bf.rec.id)
	return bench.RunOnAgents(ctx, q, bf.rec.st, bf.rec.id, t, p, params)
}

// benchAgent runs the jobs of the open and read tests handed out on a
// queue, until interrupted.
func benchAgent(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("bench agent", "\n\nA bench agent: takes the jobs of open and read tests that 'lakefed bench open|read\n--queue URL' hands out, runs them on the run's schedule, and writes their samples,\nnamed by node, into the results store. Jobs of an agent that stops are taken over by\nanother. Runs until interrupted.")
	var bf benchFlags
	bf.cf.register(fs)
	queue := fs.String("queue", "", "the Redis `URL` runs are handed out through (redis://HOST:PORT/DB)")
	node := fs.String("node", "", "this agent's `name` in the runs (default: host name and pid)")
	fs.StringVar(&bf.db, "results", "", "the results store the runs are in: a postgres:// `URL` (or a SQLite path on one machine)")
	fs.IntVar(&bf.maxConns, "max-conns", 0, "connections to a target at most (0: 1024)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *queue == "" || bf.db == "" {
		return usageErrorf("bench agent: want --queue and --results")
	}
	if *node == "" {
		host, _ := os.Hostname()
		*node = host + "-" + strconv.Itoa(os.Getpid())
	}
	bf.speed = 1
	q, err := bench.OpenQueue(ctx, *queue)
	if err != nil {
		return err
	}
	defer q.Close()
	st, err := openStoreAt(ctx, bf.db)
	if err != nil {
		return err
	}
	defer st.Close()
	log, err := newLogger("bench agent", logging.Text, slog.LevelInfo)
	if err != nil {
		return err
	}
	log = log.With("node", *node)
	log.Info("bench agent waiting for jobs", "queue", *queue)
	a := &bench.Agent{Queue: q, Store: st, Node: *node, Log: log, Target: bf.target}
	return a.Serve(ctx)
}
