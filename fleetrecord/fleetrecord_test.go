package fleetrecord

import (
	"context"
	"testing"
	"time"

	"cronlock/history"
	"cronlock/lockrun"
	"cronlock/runstatus"
)

// fakeStore is a Reader (and, with days, a DayCounter) that holds entries by key.
type fakeStore struct {
	entries   map[string][]lockrun.FleetEntry // newest first, as a backend returns them
	ticks     map[string]*lockrun.TickRecord
	tickReads int
	days      map[string][]lockrun.DayCount
	daysAsked bool
}

func (f *fakeStore) Fleet(_ context.Context, key string, limit int) ([]lockrun.FleetEntry, error) {
	es := f.entries[key]
	if limit > 0 && len(es) > limit {
		es = es[:limit]
	}
	return append([]lockrun.FleetEntry(nil), es...), nil
}

func (f *fakeStore) FleetAll(ctx context.Context, keys []string, limit int) (map[string][]lockrun.FleetEntry, error) {
	m := map[string][]lockrun.FleetEntry{}
	for _, k := range keys {
		m[k], _ = f.Fleet(ctx, k, limit)
	}
	return m, nil
}

func (f *fakeStore) FleetKeys(context.Context) ([]string, error) {
	var keys []string
	for k := range f.entries {
		keys = append(keys, k)
	}
	return keys, nil
}

func (f *fakeStore) TickRecord(_ context.Context, key string) (*lockrun.TickRecord, error) {
	f.tickReads++
	return f.ticks[key], nil
}

// dayStore adds per-day counters to fakeStore.
type dayStore struct{ *fakeStore }

func (d dayStore) FleetDays(_ context.Context, keys []string) (map[string][]lockrun.DayCount, error) {
	d.daysAsked = true
	return d.days, nil
}

var t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) int64 { return t0.Add(d).UnixMicro() }

// TestReadMergesKeysNewestFirst: without a key, every key's entries come back as one
// list, newest first; the range of a never_fired entry becomes its first tick and count
// on the key's recorded schedule, with one tick record read per key.
func TestReadMergesKeysNewestFirst(t *testing.T) {
	f := &fakeStore{
		entries: map[string][]lockrun.FleetEntry{
			"a": {
				{Key: "a", Status: lockrun.NeverFiredStatus, StartUS: at(30 * time.Minute), NeverFiredFrom: at(time.Second), NeverFiredTo: at(20 * time.Minute)},
				{Key: "a", Status: lockrun.NeverFiredStatus, StartUS: at(25 * time.Minute), NeverFiredFrom: at(time.Second), NeverFiredTo: at(5 * time.Minute)},
				{Key: "a", Status: runstatus.Succeeded, StartUS: at(0)},
			},
			"b": {{Key: "b", Status: runstatus.Failed, StartUS: at(10 * time.Minute)}},
		},
		ticks: map[string]*lockrun.TickRecord{"a": {Expr: "*/5 * * * *", TZ: "UTC"}},
	}
	es, err := Read(f, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for _, e := range es {
		starts = append(starts, e.StartUS)
	}
	want := []int64{at(30 * time.Minute), at(25 * time.Minute), at(10 * time.Minute), at(0)}
	if len(starts) != len(want) {
		t.Fatalf("starts %v, want %v", starts, want)
	}
	for i := range want {
		if starts[i] != want[i] {
			t.Fatalf("starts %v, want %v (newest first)", starts, want)
		}
	}
	if es[0].NeverFired != 4 || es[0].NeverFiredFrom != at(5*time.Minute) {
		t.Errorf("10:00:01 to 10:20 on */5: %d ticks from %v, want 4 from 10:05", es[0].NeverFired, time.UnixMicro(es[0].NeverFiredFrom).UTC())
	}
	if es[1].NeverFired != 1 || f.tickReads != 1 {
		t.Errorf("second entry %d ticks, %d tick reads; want 1 and 1", es[1].NeverFired, f.tickReads)
	}
	// Without a schedule the range stays and the count is 0.
	f.ticks = nil
	es, _ = Read(f, "a", 1)
	if len(es) != 1 || es[0].NeverFired != 0 || es[0].NeverFiredFrom != at(time.Second) {
		t.Errorf("no tick record: %+v", es)
	}
}

// TestStatsDayCounters: the per-day counters replace the entries' counts when they saw
// more runs, but not with --node (they count every host), and never the durations.
func TestStatsDayCounters(t *testing.T) {
	f := &fakeStore{days: map[string][]lockrun.DayCount{
		"k": {{Day: t0.Truncate(24 * time.Hour), Runs: 10, Succeeded: 8, Interrupted: 1}},
	}}
	es := []lockrun.FleetEntry{
		{Key: "k", Node: "web-2", Status: runstatus.Failed, StartUS: at(time.Hour), EndUS: at(time.Hour + 2*time.Second), DurationMS: 2000},
		{Key: "k", Node: "web-1", Status: runstatus.Succeeded, StartUS: at(0), EndUS: at(time.Second), DurationMS: 1000},
		{Key: "k", Status: lockrun.NeverFiredStatus, StartUS: at(0)},
	}
	stats, err := Stats(dayStore{f}, es, history.StatsFilter{})
	if err != nil || len(stats) != 1 {
		t.Fatal(stats, err)
	}
	if s := stats[0]; s.Runs != 10 || s.Succeeded != 8 || s.Interrupted != 1 || s.Failed != 1 || s.Max != 2*time.Second {
		t.Errorf("with counters: %+v", s)
	}
	f.daysAsked = false
	stats, _ = Stats(dayStore{f}, es, history.StatsFilter{Node: "web-1"})
	if s := stats[0]; s.Runs != 1 || s.Succeeded != 1 || s.Failed != 0 || f.daysAsked {
		t.Errorf("--node web-1: %+v", s)
	}
	stats, _ = Stats(f, es, history.StatsFilter{Last: 1})
	if s := stats[0]; s.Runs != 1 || s.Failed != 1 || !s.Truncated {
		t.Errorf("no counters, --last 1: %+v", s)
	}
}
