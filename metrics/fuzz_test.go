package metrics

// Fuzz targets for the parser of previous metrics files. Without -fuzz they run their
// seeds (f.Add and testdata/fuzz) as ordinary, fast tests.
//
//	go test -run '^$' -fuzz '^FuzzMetricsParse$' -fuzztime 60s ./metrics/

import (
	"testing"
	"time"
)

// FuzzMetricsParse: whatever the previous metrics file holds, reading it does not panic;
// one that parses writes back to samples that parse the same, and the counters it
// carries over into the next file are there for cronlock and expfmt alike.
func FuzzMetricsParse(f *testing.F) {
	seed, err := encode(Facts{Key: `a"b\c/d:e`, Node: "nœud\n🐳", Status: "failed", ExitCode: 3,
		Started: time.Unix(1795956040, 0), Finished: time.Unix(1795956041, 5)},
		previous{runs: map[string]float64{"succeeded": 1234567, "new": 2}, lastSuccess: 1.5})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(clientGolangFile))
	f.Add([]byte("m{} 1e-9\nm{a=\"\\\\\\n\\\"\"} -0\n"))
	f.Add([]byte("cronlock_runs_total{key=\"k\" 3\x00garbage"))
	f.Fuzz(func(t *testing.T, data []byte) { checkMetricsRoundTrip(t, data) })
}
