package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"
)

// trivialServer answers from memory as cheaply as it can: PUT is
// accepted and dropped, a "bytes=0-0" GET gets one byte, other GETs are
// served from one shared buffer. It measures the load generator, not a
// server.
func trivialServer(tb testing.TB, size int) *httptest.Server {
	data := bytes.Repeat([]byte{'x'}, size)
	cr := "bytes 0-0/" + strconv.Itoa(size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut:
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.Header.Get("Range") == "bytes=0-0":
			h := w.Header()
			h["Content-Range"] = []string{cr}
			h["Content-Length"] = []string{"1"}
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:1])
		default:
			http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(data))
		}
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkGeneratorOpen measures the open rate the generator drives
// against a trivial server on this machine. Shape from the environment:
// GEN_JOBS jobs at 2 Hz × GEN_SPEED, held GEN_SECS seconds.
//
//	GEN_JOBS=200 GEN_SPEED=50 go test -run X -bench GeneratorOpen -benchtime 1x ./internal/bench/
func BenchmarkGeneratorOpen(b *testing.B) {
	jobs, speed, secs := envInt("GEN_JOBS", 200), envInt("GEN_SPEED", 50), envInt("GEN_SECS", 5)
	srv := trivialServer(b, 4096)
	tg := newTarget(b, srv.URL+"/", "")
	for b.Loop() {
		res, err := Open(context.Background(), tg, OpenOptions{
			Common: Common{Speed: float64(speed), Seed: 1},
			Ramp:   Ramp{Jobs: jobs, Every: time.Duration(secs*speed) * time.Second},
			Files:  100,
		})
		if err != nil {
			b.Fatal(err)
		}
		s := res.Summary.(*OpenSummary)
		b.ReportMetric(s.ExpectedRate, "expected-opens/s")
		b.ReportMetric(s.ObservedRate, "opens/s")
		b.ReportMetric(float64(s.Failures), "failures")
		b.ReportMetric(s.P99*1000, "p99-ms")
	}
}

// BenchmarkGeneratorRead measures how many paced read jobs the generator
// keeps on schedule against a trivial server: GEN_JOBS jobs each reading
// GEN_BLOCK bytes every 10 s / GEN_SPEED, held GEN_SECS seconds.
//
//	GEN_JOBS=6000 GEN_BLOCK=2621440 go test -run X -bench GeneratorRead -benchtime 1x ./internal/bench/
func BenchmarkGeneratorRead(b *testing.B) {
	jobs, speed, secs, block := envInt("GEN_JOBS", 6000), envInt("GEN_SPEED", 1), envInt("GEN_SECS", 30), envInt("GEN_BLOCK", 5<<19)
	srv := trivialServer(b, 8*block)
	tg := newTarget(b, srv.URL+"/", "")
	for b.Loop() {
		res, err := Read(context.Background(), tg, ReadOptions{
			Common: Common{Speed: float64(speed), Seed: 1},
			Ramp:   Ramp{Jobs: jobs, Every: time.Duration(secs*speed) * time.Second},
			Block:  int64(block),
			Files:  10,
		})
		if err != nil {
			b.Fatal(err)
		}
		s := res.Summary.(*ReadSummary)
		b.ReportMetric(float64(s.SustainedLast), "sustained-jobs")
		b.ReportMetric(s.ObservedRate/(1<<20), "MiB/s")
		b.ReportMetric(s.ExpectedRate/(1<<20), "expected-MiB/s")
		b.ReportMetric(s.MeanBlockTime*1000, "block-ms")
		b.ReportMetric(float64(s.Failures), "failures")
	}
}
