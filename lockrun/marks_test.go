package lockrun

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"
)

func TestClaimMarks(t *testing.T) {
	const utc, berlin = "* * * * * UTC", "* * * * * Europe/Berlin"
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	us := func(d time.Duration) int64 { return t0.Add(d).UnixMicro() }
	s := func(d time.Duration) string { return strconv.FormatInt(us(d), 10) }
	now := us(10 * time.Minute)
	req := func(cx string, prev time.Duration) Request {
		r := Request{RunID: "r2", Canonical: cx, Tick: t0.Add(prev + time.Minute)}
		if prev >= 0 {
			r.PrevTick = t0.Add(prev)
		}
		return r
	}
	rec := func(cx string, tick time.Duration, held string, sched ...[2]string) *TickValue {
		return &TickValue{TickUS: s(tick), RunID: "r1", CX: cx, HeldUS: held, Sched: sched}
	}
	for _, c := range []struct {
		name string
		prev *TickValue
		req  Request
		want TickMarks
	}{
		{"first claim", nil, req(utc, 0), TickMarks{Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
		{"same schedule, next tick", rec(utc, 0, "", [2]string{utc, s(0)}), req(utc, 0),
			TickMarks{Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
		{"two ticks never fired", rec(utc, 0, "", [2]string{utc, s(0)}), req(utc, 2*time.Minute),
			TickMarks{NeverFiredFrom: us(0) + 1, NeverFiredTo: us(2 * time.Minute), Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
		{"held tick is not never fired", rec(utc, 0, s(time.Minute), [2]string{utc, s(0)}), req(utc, time.Minute),
			TickMarks{Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
		{"never fired after the held tick", rec(utc, 0, s(time.Minute), [2]string{utc, s(0)}), req(utc, 3*time.Minute),
			TickMarks{NeverFiredFrom: us(time.Minute) + 1, NeverFiredTo: us(3 * time.Minute), Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
		{"a change is no never fired", rec(berlin, 0, "", [2]string{berlin, s(0)}), req(utc, 5*time.Minute),
			TickMarks{ScheduleWas: berlin, Sched: SchedHistory{{berlin, s(0)}, {utc, s(10 * time.Minute)}}}},
		{"flip back within 24h", rec(berlin, 0, "", [2]string{utc, s(-time.Hour)}, [2]string{berlin, s(0)}), req(utc, 0),
			TickMarks{ScheduleWas: berlin, Flip: true, Sched: SchedHistory{{utc, s(10 * time.Minute)}, {berlin, s(0)}}}},
		{"back after 24h is a change", rec(berlin, 0, "", [2]string{utc, s(-25 * time.Hour)}, [2]string{berlin, s(0)}), req(utc, 0),
			TickMarks{ScheduleWas: berlin, Sched: SchedHistory{{berlin, s(0)}, {utc, s(10 * time.Minute)}}}},
		{"own retried claim", &TickValue{TickUS: s(time.Minute), RunID: "r2", CX: berlin, Sched: SchedHistory{{berlin, s(0)}}}, req(utc, 3*time.Minute),
			TickMarks{Sched: SchedHistory{{berlin, s(0)}, {utc, s(10 * time.Minute)}}}},
		{"no schedule history (older record)", &TickValue{TickUS: s(0), RunID: "r1"}, req(utc, 3*time.Minute),
			TickMarks{Sched: SchedHistory{{utc, s(10 * time.Minute)}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ClaimMarks(c.prev, c.req, now); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestSchedHistoryTolerant: cjson writes an empty history as {}; the record stays readable.
func TestSchedHistoryTolerant(t *testing.T) {
	var v TickValue
	if err := json.Unmarshal([]byte(`{"tick_us":"1","run_id":"a","sched":{}}`), &v); err != nil || v.RunID != "a" || v.Sched != nil {
		t.Fatalf("%+v, %v", v, err)
	}
	if err := json.Unmarshal([]byte(`{"tick_us":"1","sched":[["x","2"],3]}`), &v); err != nil || len(v.Sched) != 1 || v.Sched[0][0] != "x" {
		t.Fatalf("%+v, %v", v, err)
	}
}
