package sitetest

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tester's Prometheus series. With no Registerer they
// exist but are exported nowhere.
type metrics struct {
	suspect prometheus.Gauge
	tests   *prometheus.CounterVec
	excl    *prometheus.GaugeVec
	// class is 1 for the classification of each endpoint's latest test
	// and 0 for the other; last is when that test started. With a
	// shared results store several federators take turns at the rounds,
	// each exporting its own latest: the alert rules keep the freshest.
	class *prometheus.GaugeVec
	last  *prometheus.GaugeVec
}

// The classifications of a test, as stored in the results store and
// exported in lakefed_tests_classification.
const (
	// ClassOK: every operation of the test succeeded.
	ClassOK = "ok"
	// ClassToDebug: an operation failed; the run's reasons say which.
	ClassToDebug = "to debug"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		suspect: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lakefed_tests_tester_suspect",
			Help: "1 when the last round of scheduled tests failed on too many endpoints at once to trust (no exclusions made)."}),
		tests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakefed_tests_total",
			Help: "Scheduled functional tests by endpoint and result (ok, failed)."}, []string{"endpoint", "result"}),
		excl: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakefed_tests_excluded",
			Help: "1 when the scheduled tests have the endpoint excluded (marked down)."}, []string{"endpoint"}),
		class: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakefed_tests_classification",
			Help: "1 for the classification (ok, to debug) of the endpoint's latest scheduled test run by this process, 0 for the other."},
			[]string{"endpoint", "classification"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakefed_tests_last_timestamp_seconds",
			Help: "When the endpoint's latest scheduled test run by this process started (Unix time)."}, []string{"endpoint"}),
	}
	if reg == nil {
		return m, nil
	}
	// A second scheduler on one registry (tests, a restarted tester)
	// shares the series the first registered.
	register := func(c prometheus.Collector) (prometheus.Collector, error) {
		err := reg.Register(c)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector, nil
		}
		return c, err
	}
	var err error
	var c prometheus.Collector
	if c, err = register(m.suspect); err != nil {
		return nil, err
	}
	m.suspect = c.(prometheus.Gauge)
	if c, err = register(m.tests); err != nil {
		return nil, err
	}
	m.tests = c.(*prometheus.CounterVec)
	if c, err = register(m.excl); err != nil {
		return nil, err
	}
	m.excl = c.(*prometheus.GaugeVec)
	if c, err = register(m.class); err != nil {
		return nil, err
	}
	m.class = c.(*prometheus.GaugeVec)
	if c, err = register(m.last); err != nil {
		return nil, err
	}
	m.last = c.(*prometheus.GaugeVec)
	return m, nil
}

// result counts a test of name that started at started and exports its
// classification.
func (m *metrics) result(name string, ok bool, started time.Time) {
	r := "ok"
	if !ok {
		r = "failed"
	}
	m.tests.WithLabelValues(name, r).Inc()
	m.class.WithLabelValues(name, ClassOK).Set(b2f(ok))
	m.class.WithLabelValues(name, ClassToDebug).Set(b2f(!ok))
	m.last.WithLabelValues(name).Set(float64(started.UnixNano()) / 1e9)
}

func (m *metrics) excluded(name string, on bool) { m.excl.WithLabelValues(name).Set(b2f(on)) }

func (m *metrics) forget(name string) {
	m.tests.DeleteLabelValues(name, "ok")
	m.tests.DeleteLabelValues(name, "failed")
	m.excl.DeleteLabelValues(name)
	m.class.DeleteLabelValues(name, ClassOK)
	m.class.DeleteLabelValues(name, ClassToDebug)
	m.last.DeleteLabelValues(name)
}
