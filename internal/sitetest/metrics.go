package sitetest

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the tester's Prometheus series. With no Registerer they
// exist but are exported nowhere.
type metrics struct {
	suspect prometheus.Gauge
	tests   *prometheus.CounterVec
	excl    *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		suspect: prometheus.NewGauge(prometheus.GaugeOpts{Name: "lakefed_tests_tester_suspect",
			Help: "1 when the last round of scheduled tests failed on too many endpoints at once to trust (no exclusions made)."}),
		tests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lakefed_tests_total",
			Help: "Scheduled functional tests by endpoint and result (ok, failed)."}, []string{"endpoint", "result"}),
		excl: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lakefed_tests_excluded",
			Help: "1 when the scheduled tests have the endpoint excluded (marked down)."}, []string{"endpoint"}),
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
	return m, nil
}

func (m *metrics) result(name string, ok bool) {
	r := "ok"
	if !ok {
		r = "failed"
	}
	m.tests.WithLabelValues(name, r).Inc()
}

func (m *metrics) excluded(name string, on bool) { m.excl.WithLabelValues(name).Set(b2f(on)) }

func (m *metrics) forget(name string) {
	m.tests.DeleteLabelValues(name, "ok")
	m.tests.DeleteLabelValues(name, "failed")
	m.excl.DeleteLabelValues(name)
}
