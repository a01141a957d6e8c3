package child

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOutputHandoff: a regular file as cronlock's stdout is given to the job as it is, and
// the tail is read back from the part of it the job wrote.
func TestOutputHandoff(t *testing.T) {
	dir := t.TempDir()
	open := func(name string, flag int, content string) *os.File {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}

	t.Run("write-only, the same file for both", func(t *testing.T) {
		f := open("both", os.O_WRONLY|os.O_TRUNC, "")
		res, _ := supervise(t, Job{Argv: sh(`readlink /proc/$$/fd/1 /proc/$$/fd/2; echo out; echo err >&2`),
			Stdout: f, Stderr: f, Capture: 1000, Grace: time.Second}, nil, nil, nil)
		want := f.Name() + "\n" + f.Name() + "\nout\nerr\n"
		if string(res.Output) != want || res.Streams != nil || res.OutputErr != nil {
			t.Fatalf("output %q streams %v err %v; want %q unmarked (the job writes to the file itself)", res.Output, res.Streams, res.OutputErr, want)
		}
	})

	t.Run("O_APPEND with earlier content: only this run's bytes", func(t *testing.T) {
		f := open("append", os.O_WRONLY|os.O_APPEND, "an earlier run\n")
		res, _ := supervise(t, Job{Argv: sh(`echo this run`), Stdout: f, Stderr: f, Capture: 1000, Grace: time.Second}, nil, nil, nil)
		if string(res.Output) != "this run\n" {
			t.Fatalf("output %q", res.Output)
		}
		b, _ := os.ReadFile(f.Name())
		if string(b) != "an earlier run\nthis run\n" {
			t.Fatalf("file %q", b)
		}
	})

	t.Run("offset in an older, longer file (1<>file)", func(t *testing.T) {
		f := open("rw", os.O_RDWR, "0123456789abcdef")
		if _, err := f.Seek(4, 0); err != nil {
			t.Fatal(err)
		}
		res, _ := supervise(t, Job{Argv: sh(`printf XY`), Stdout: f, Stderr: f, Capture: 1000, Grace: time.Second}, nil, nil, nil)
		if string(res.Output) != "XY" {
			t.Fatalf("output %q, want only the bytes the job wrote", res.Output)
		}
	})

	t.Run("tail of a long output", func(t *testing.T) {
		f := open("long", os.O_WRONLY|os.O_TRUNC, "")
		res, _ := supervise(t, Job{Argv: sh(`seq 100000`), Stdout: f, Stderr: f, Capture: 7, Grace: time.Second}, nil, nil, nil)
		if string(res.Output) != "\n100000\n"[1:] {
			t.Fatalf("output %q", res.Output)
		}
	})

	t.Run("two files: stdout's end, then stderr's, marked", func(t *testing.T) {
		o := open("o", os.O_WRONLY|os.O_TRUNC, "")
		e := open("e", os.O_WRONLY|os.O_TRUNC, "")
		res, _ := supervise(t, Job{Argv: sh(`echo err >&2; echo out`), Stdout: o, Stderr: e, Capture: 1000, Grace: time.Second}, nil, nil, nil)
		want := []Segment{{StreamStdout, 4}, {StreamStderr, 4}}
		if string(res.Output) != "out\nerr\n" || !slices.Equal(res.Streams, want) {
			t.Fatalf("output %q streams %v", res.Output, res.Streams)
		}
	})

	t.Run("stdout a file, stderr relayed: the capture is shared", func(t *testing.T) {
		o := open("o2", os.O_WRONLY|os.O_TRUNC, "")
		k := newSink(t, "", false)
		res, _ := supervise(t, Job{Argv: sh(`seq 1000; seq 1000 >&2`), Stdout: o, Stderr: k.w, Capture: 10, Grace: time.Second}, nil, nil, nil)
		want := []Segment{{StreamStdout, 5}, {StreamStderr, 5}}
		if string(res.Output) != "\n1000\n1000\n"[1:] || !slices.Equal(res.Streams, want) {
			t.Fatalf("output %q streams %v", res.Output, res.Streams)
		}
		if got, _ := k.all(); !bytes.HasSuffix(got, []byte("999\n1000\n")) {
			t.Fatalf("stderr not relayed: %q", got)
		}
		// A quiet stream leaves its half to the other.
		o3 := open("o3", os.O_WRONLY|os.O_TRUNC, "")
		k = newSink(t, "", false)
		res, _ = supervise(t, Job{Argv: sh(`seq 1000; echo e >&2`), Stdout: o3, Stderr: k.w, Capture: 10, Grace: time.Second}, nil, nil, nil)
		if string(res.Output) != "99\n1000\ne\n" {
			t.Fatalf("output %q streams %v", res.Output, res.Streams)
		}
	})

	t.Run("truncated while the job runs", func(t *testing.T) {
		f := open("rotated", os.O_WRONLY|os.O_APPEND, strings.Repeat("old\n", 100))
		res, _ := supervise(t, Job{Argv: sh(`echo before; : >"$1"; echo after`, f.Name()), Stdout: f, Stderr: f, Capture: 1000, Grace: time.Second}, nil, nil, nil)
		if string(res.Output) != "after\n" || res.OutputErr != nil {
			t.Fatalf("output %q err %v", res.Output, res.OutputErr)
		}
	})

	t.Run("the job meets its own EFBIG", func(t *testing.T) {
		// RLIMIT_FSIZE stands for a full disk (a test cannot fill one): the job gets
		// SIGXFSZ as it would without cronlock, and the file stops at the limit.
		f := open("limited", os.O_WRONLY|os.O_TRUNC, "")
		res, _ := supervise(t, Job{Argv: sh(`ulimit -f 8; exec head -c 100000 /dev/zero`), Stdout: f, Stderr: f, Capture: 100, Grace: time.Second}, nil, nil, nil)
		fi, _ := f.Stat()
		if res.Signal != unix.SIGXFSZ || res.OutputErr != nil || len(res.Output) != 100 {
			t.Fatalf("signal %v err %v tail %d bytes; file %d bytes", res.Signal, res.OutputErr, len(res.Output), fi.Size())
		}
	})
}

// TestOutputWriteError: cronlock's stdout fails with ENOSPC (/dev/full). The job is not
// blocked (the relay drains its pipe), and the run reports every byte that was lost.
func TestOutputWriteError(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	const total = 3_000_000
	for _, tc := range []struct {
		name   string
		stderr *os.File
		stream string
	}{
		{"stdout only", os.Stderr, "stdout"},
		{"one file for both", full, "stdout and stderr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := supervise(t, Job{Argv: sh(`head -c ` + strconv.Itoa(total) + ` /dev/zero`), Stdout: full, Stderr: tc.stderr, Capture: 100, Grace: time.Second}, nil, nil, nil)
			var oe *OutputError
			if res.ExitCode != 0 || !errors.As(res.OutputErr, &oe) {
				t.Fatalf("exit %d, OutputErr %v", res.ExitCode, res.OutputErr)
			}
			if oe.Stream != tc.stream || oe.Lost != total || !errors.Is(oe, unix.ENOSPC) || len(res.Output) != 100 {
				t.Fatalf("got %+v (%v), tail %d bytes", oe, oe, len(res.Output))
			}
		})
	}
}

// TestSuperviseReturnsBeforeSlowReader: the job's output does not fit in the pipes, the
// reader of cronlock's stdout has not read yet, the job is gone: Supervise returns (the
// caller can release the lock), and WaitOutput then passes everything on.
func TestSuperviseReturnsBeforeSlowReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const total = 1_200_000 // more than cronlock's own stdout pipe holds (1 MiB at most)
	sig, _ := testSignals(t)
	type out struct {
		res Result
		err error
	}
	ch := make(chan out, 1)
	go func() {
		res := Supervise(context.Background(), Job{Argv: sh(`head -c ` + strconv.Itoa(total) + ` /dev/zero`),
			Stdout: w, Stderr: os.Stderr, Capture: 100, Grace: time.Second}, sig, nil, nil)
		ch <- out{res: res}
	}()
	var res Result
	select {
	case o := <-ch:
		res = o.res
	case <-time.After(20 * time.Second):
		t.Fatal("Supervise waited for the reader: the lock would be held until it reads")
	}
	if !procGone(res.PID) || res.ExitCode != 0 {
		t.Fatalf("got %+v", res)
	}
	done := make(chan struct{})
	go func() { res.WaitOutput(); w.Close(); close(done) }()
	n, err := drain(r)
	<-done
	if err != nil || n != total || res.OutputErr != nil || len(res.Output) != 100 {
		t.Fatalf("read %d bytes (%v), want %d; output error %v", n, err, total, res.OutputErr)
	}
}

func drain(f *os.File) (int64, error) {
	var n int64
	b := make([]byte, 64<<10)
	for {
		m, err := f.Read(b)
		n += int64(m)
		if err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
	}
}
