package lockrun

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"cronlock/runstatus"
)

// TestDeriveAbandoned: only a running entry whose run does not hold the lock reads as
// abandoned; the holder's stays running, finished entries stay as they are.
func TestDeriveAbandoned(t *testing.T) {
	es := []FleetEntry{
		{RunID: "a", Status: runstatus.Running},
		{RunID: "b", Status: runstatus.Running},
		{RunID: "c", Status: runstatus.Succeeded},
		{RunID: "d", Status: runstatus.Missed},
	}
	DeriveAbandoned(es, "b")
	var got []string
	for _, e := range es {
		got = append(got, e.RunID+":"+e.Status)
	}
	if strings.Join(got, " ") != "a:abandoned b:running c:succeeded d:missed" || es[0].Error == "" {
		t.Fatalf("got %v (error %q)", got, es[0].Error)
	}
	es = []FleetEntry{{RunID: "a", Status: runstatus.Running}}
	if DeriveAbandoned(es, ""); es[0].Status != runstatus.Abandoned {
		t.Fatalf("a running entry with the lock free: %s; want abandoned", es[0].Status)
	}
}

// TestParseDayCounts: one field per day, "r,s,f,i,m,n,d", oldest first; junk skipped.
func TestParseDayCounts(t *testing.T) {
	got := ParseDayCounts(map[string]string{"20424": "10,7,2,1,0,0,0", "20423": "3,3", "x": "1", "20425": "5,z,1"})
	if len(got) != 3 {
		t.Fatalf("got %+v; want three days", got)
	}
	if d := got[0]; !d.Day.Equal(time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)) || d.Runs != 3 || d.Succeeded != 3 || d.Failed != 0 {
		t.Errorf("first day %+v", d)
	}
	if d := got[1]; d.Runs != 10 || d.Succeeded != 7 || d.Failed != 2 || d.Interrupted != 1 {
		t.Errorf("second day %+v", d)
	}
	if d := got[2]; d.Runs != 5 || d.Succeeded != 0 || d.Failed != 1 {
		t.Errorf("third day %+v", d)
	}
}

// TestEncodeEntryFits: an entry with the longest node, error, version and command hash
// leaves the scripts their room within 640 bytes, decodes, and a claim's entry carries no
// exit code.
func TestEncodeEntryFits(t *testing.T) {
	rec := &RunRecord{RunID: "01a2340d-2ad4-7671-8291-dbcaf9c79b95", Node: strings.Repeat("n", 300), Status: runstatus.Failed,
		Exit: 1, Signal: "SIGTERM", Tick: time.Unix(1_800_000_000, 0), Duration: time.Hour, Tries: 3,
		Error: strings.Repeat("é\"\n", 200), Version: strings.Repeat("v", 100), Attempt: 2, TakeoverOf: "01a2340d-2ad4-7671-8291-dbcaf9c79b96",
		CmdHash: "0123456789abcdef"}
	s := EncodeFleetEntry(rec, 1<<63)
	if len(s)+fleetSuffixRoom > maxFleetEntry {
		t.Fatalf("entry of %d bytes leaves less than %d for the scripts", len(s), fleetSuffixRoom)
	}
	var e FleetEntry
	if err := json.Unmarshal([]byte(s+`,"a":1796169607894113,"f":1796169607894114,"k":0}`), &e); err != nil || e.Fence != 1<<63 || e.Attempt != 2 || e.CmdHash != "0123456789abcdef" {
		t.Fatalf("decoded %+v, %v", e, err)
	}
	rec.Status = runstatus.Running
	if c := EncodeClaimEntry(rec); strings.Contains(c, `"x":`) {
		t.Errorf("a running claim's entry has an exit code: %s", c)
	}
}

// TestEntryCheckpoint: an entry keeps the first FleetCheckpointBytes of the run's last
// checkpoint, binary-safe, and stays within maxFleetEntry with every other field at its
// largest but a schedule change: the error and the checkpoint are cut, and some of each
// is kept.
func TestEntryCheckpoint(t *testing.T) {
	cp := []byte(strings.Repeat("\xff\x00\x1b", 70))
	rec := &RunRecord{RunID: "0195520a-1b00-7000-8000-000000000001", Node: "n", Status: runstatus.Succeeded, Checkpoint: cp}
	var e FleetEntry
	s := EncodeFleetEntry(rec, 7) + `,"a":1,"f":2,"k":0}`
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	if string(e.Checkpoint) != string(cp[:FleetCheckpointBytes]) {
		t.Fatalf("entry checkpoint %q; want the first %d bytes", e.Checkpoint, FleetCheckpointBytes)
	}
	if s := EncodeFleetEntry(&RunRecord{RunID: "x", Status: runstatus.Succeeded}, 0); strings.Contains(s, `"cp"`) {
		t.Fatalf("entry of a run without checkpoints: %s", s)
	}
	big := *rec
	big.Node, big.Error = strings.Repeat("n", 64), strings.Repeat("e", 400)
	big.Version, big.CmdHash = strings.Repeat("v", 40), strings.Repeat("h", 32)
	big.TakeoverOf, big.Tick, big.Attempt, big.Exit, big.Signal = rec.RunID, time.Now(), 9, 124, "SIGTERM"
	s = EncodeFleetEntry(&big, 1<<63)
	if len(s)+fleetSuffixRoom > maxFleetEntry {
		t.Fatalf("entry of %d bytes (+%d the scripts add) > %d: %s", len(s), fleetSuffixRoom, maxFleetEntry, s)
	}
	if err := json.Unmarshal([]byte(s+`}`), &e); err != nil || len(e.Checkpoint) < 24 || e.Error == "" {
		t.Fatalf("a full entry: %v, checkpoint of %d bytes, error %q; want some of both: %s", err, len(e.Checkpoint), e.Error, s)
	}
}
