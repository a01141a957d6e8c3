package jobrun

import (
	"errors"
	"testing"
	"time"

	"cronlock/child"
	"cronlock/history"
)

func TestRetryDelayDoublesAndCaps(t *testing.T) {
	r := &runner{o: &Options{RetryDelay: 10 * time.Second}}
	defer func(f func(time.Duration) time.Duration) { randN = f }(randN)
	randN = func(n time.Duration) time.Duration { return n - 1 } // the largest share
	for _, tc := range []struct {
		try  int
		want time.Duration
	}{
		{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second},
		{6, 320 * time.Second}, {7, maxRetryDelay}, {60, maxRetryDelay}, // no overflow
	} {
		if got := r.retryDelay(tc.try); got != tc.want-1 {
			t.Errorf("after try %d: delay %v, want just under %v", tc.try, got, tc.want)
		}
	}
	randN = func(time.Duration) time.Duration { return 0 }
	if got := r.retryDelay(3); got != 0 {
		t.Errorf("full jitter: delay %v, want 0 when the random share is 0", got)
	}
	r.o.RetryDelay = 0
	if got := r.retryDelay(1); got != 0 {
		t.Errorf("--retry-delay 0: delay %v, want 0", got)
	}
}

func TestRetryDelayIsRandomWithinBound(t *testing.T) {
	r := &runner{o: &Options{RetryDelay: time.Second}}
	seen := map[time.Duration]bool{}
	for range 50 {
		d := r.retryDelay(2)
		if d < 0 || d >= 2*time.Second {
			t.Fatalf("delay %v after try 2 of --retry-delay 1s, want [0, 2s)", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("50 delays took %d values: not random", len(seen))
	}
}

// TestRetryable: only a job that ended by itself with a failing code is tried again.
func TestRetryable(t *testing.T) {
	exited := func(code int) child.Result {
		return child.Result{Started: true, Reason: child.ReasonExited, ExitCode: code}
	}
	killed := exited(-1)
	killed.Signal = 9
	lost := exited(1)
	lost.LossErr = errors.New("gone")
	outErr := exited(1)
	outErr.OutputErr = errors.New("no space")
	for _, tc := range []struct {
		name    string
		res     child.Result
		retryOn []int
		want    bool
	}{
		{"failed", exited(1), nil, true},
		{"killed by a signal of its own", killed, nil, true},
		{"succeeded", exited(0), nil, false},
		{"code listed", exited(75), []int{75, 111}, true},
		{"code not listed", exited(1), []int{75, 111}, false},
		{"signal death listed as 128+N", killed, []int{137}, true},
		{"not found", child.Result{StartErr: &child.StartError{Kind: child.NotFound}}, nil, false},
		{"timeout", child.Result{Started: true, Reason: child.ReasonTimeout, Signal: 15, ExitCode: -1}, nil, false},
		{"lock lost", child.Result{Started: true, Reason: child.ReasonLockLost, Signal: 15, ExitCode: -1, LossErr: errors.New("gone")}, nil, false},
		{"lost but finished (continue)", lost, nil, false},
		{"interrupted", child.Result{Started: true, Reason: child.ReasonSignal, StopSignal: nil, ExitCode: 143}, nil, false},
		{"output lost", outErr, nil, false},
	} {
		o := &Options{Key: "k", RetryOn: tc.retryOn}
		r := &runner{o: o, row: &history.Run{Try: 1}}
		if got := r.retryable(tc.res, outcomeOf(tc.res, o)); got != tc.want {
			t.Errorf("%s: retryable %v, want %v", tc.name, got, tc.want)
		}
	}
}
