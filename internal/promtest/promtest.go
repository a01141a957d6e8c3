// Package promtest reads metrics files in tests as node_exporter does, with the
// Prometheus text parser (expfmt), which cronlock itself does not link.
package promtest

import (
	"bytes"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses the text of a metrics file into its families, by name.
func Parse(b []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	return p.TextToMetricFamilies(bytes.NewReader(b))
}

// SeriesOf reports whether m is a series of key on node, and its status label.
func SeriesOf(m *dto.Metric, key, node string) (status string, ok bool) {
	var k, n string
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "key":
			k = l.GetValue()
		case "node":
			n = l.GetValue()
		case "status":
			status = l.GetValue()
		}
	}
	return status, k == key && n == node
}

// Value is m's value whatever TYPE line its family had (or lacked).
func Value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}
