package child

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSpoolAcrossSupervise: one spool serves several Supervise calls (the tries of one
// run); each call's tail is its own output; Finish writes everything in order, or, past
// the limit, the first and last halves around one line; a succeeded run writes nothing.
func TestSpoolAcrossSupervise(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int64
		succeeded bool
	}{
		{"in full", 1 << 20, false},
		{"halves", 40, false},
		{"odd limit, wrapped many times", 7, false},
		{"succeeded", 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := os.Create(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			sp, err := OpenSpool(t.TempDir(), tc.max, out, out)
			if err != nil {
				t.Fatal(err)
			}
			var all bytes.Buffer
			for try := 1; try <= 3; try++ {
				script := fmt.Sprintf("i=0; while [ $i -lt 20 ]; do echo try%d-$i; echo e%d-$i >&2; i=$((i+1)); done", try, try)
				res, _ := supervise(t, Job{Argv: sh(script), Stdout: out, Stderr: out, Capture: 16, Spool: sp, Grace: time.Second}, nil, nil, nil)
				res.WaitOutput()
				var want bytes.Buffer
				for i := 0; i < 20; i++ {
					fmt.Fprintf(&want, "try%d-%d\ne%d-%d\n", try, i, try, i)
				}
				all.Write(want.Bytes())
				tailWant := want.Bytes()[want.Len()-min(16, int(tc.max-tc.max/2)):]
				if !bytes.Equal(res.Output, tailWant) || res.Streams != nil || res.OutputErr != nil {
					t.Fatalf("try %d: tail %q streams %v err %v; want %q", try, res.Output, res.Streams, res.OutputErr, tailWant)
				}
			}
			if err := sp.Finish(tc.succeeded); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(out.Name())
			b := all.Bytes()
			want := b
			switch {
			case tc.succeeded:
				want = nil
			case int64(len(b)) > tc.max:
				h := int(tc.max / 2)
				line := fmt.Sprintf("cronlock: --output-max %d: dropped %s of the job's output here, between the first %d and the last %d bytes\n",
					tc.max, formatBytes(int64(len(b))-tc.max), h, int(tc.max)-h)
				if b[h-1] != '\n' {
					line = "\n" + line
				}
				want = []byte(string(b[:h]) + line + string(b[len(b)-(int(tc.max)-h):]))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written:\n%s\nwant:\n%s", got, want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("spool folder holds %d entries", len(ents))
			}
		})
	}
}

// TestSpoolTwoStreams: stdout and stderr to different files get a spool each, written
// each to its own, and a tail marked stdout then stderr.
func TestSpoolTwoStreams(t *testing.T) {
	dir := t.TempDir()
	o, _ := os.Create(filepath.Join(dir, "o"))
	e, _ := os.Create(filepath.Join(dir, "e"))
	defer o.Close()
	defer e.Close()
	sp, err := OpenSpool(dir, 1<<20, o, e)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := supervise(t, Job{Argv: sh("echo out; echo err >&2; exit 1"), Stdout: o, Stderr: e, Capture: 100, Spool: sp, Grace: time.Second}, nil, nil, nil)
	res.WaitOutput()
	if string(res.Output) != "out\nerr\n" || len(res.Streams) != 2 || res.Streams[0].Stream != StreamStdout {
		t.Fatalf("tail %q streams %v", res.Output, res.Streams)
	}
	if b, _ := os.ReadFile(o.Name()); len(b) != 0 {
		t.Fatalf("stdout written before Finish: %q", b)
	}
	if err := sp.Finish(false); err != nil {
		t.Fatal(err)
	}
	bo, _ := os.ReadFile(o.Name())
	be, _ := os.ReadFile(e.Name())
	if string(bo) != "out\n" || string(be) != "err\n" {
		t.Fatalf("stdout %q stderr %q", bo, be)
	}
	if sp.Finish(false) != nil {
		t.Fatal("a second Finish did something")
	}
	if b, _ := os.ReadFile(o.Name()); !strings.EqualFold(string(b), "out\n") {
		t.Fatalf("stdout after a second Finish: %q", b)
	}
}
