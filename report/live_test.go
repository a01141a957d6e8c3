package report_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cronlock/internal/proctest"
	"cronlock/internal/redistest"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// cronlockBin builds the cronlock binary once for the live tests of this package.
func cronlockBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cronlock-report-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "cronlock")
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build cronlock: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// host is one machine of a live fleet: its own node name, history and lock folder.
type host struct {
	t   *testing.T
	bin string
	env []string
	dir string
}

func newHost(t *testing.T, bin, url, node string) *host {
	dir := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRONLOCK_") {
			env = append(env, kv)
		}
	}
	env = append(env, "CRONLOCK_CONFIG="+os.DevNull, "CRONLOCK_BACKEND=redis", "CRONLOCK_REDIS_URL="+url,
		"CRONLOCK_NODE="+node, "CRONLOCK_HISTORY="+filepath.Join(dir, "history.db"),
		"CRONLOCK_LOCK_DIR="+filepath.Join(dir, "locks"))
	return &host{t: t, bin: bin, env: env, dir: dir}
}

func (h *host) command(args ...string) *exec.Cmd {
	c := exec.Command(h.bin, args...)
	c.Env, c.Dir = h.env, h.dir
	return c
}

// run runs cronlock to its end; a code other than want fails the test.
func (h *host) run(want int, args ...string) {
	h.t.Helper()
	c := h.command(args...)
	var errb bytes.Buffer
	c.Stderr = &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	if code != want {
		h.t.Fatalf("cronlock %v: exit %d, want %d; stderr %q", args, code, want, errb.String())
	}
}

// TestChromiumLiveFleet: three hosts run real cronlock against a real Redis and leave a
// DUPLICATE (a roll-out: one host still runs the line without --schedule), a missed tick
// and a standby's takeover of a host that was killed; `cronlock report --fleet` draws the
// record, and a suspended run of a job another host suspended; Chromium shows those
// marks and the takeover's card.
func TestChromiumLiveFleet(t *testing.T) {
	chromiumPath(t)
	url := "redis://" + redistest.Start(t).Addr + "/0"
	bin := cronlockBin(t)
	a, b, c := newHost(t, bin, url, "vmA"), newHost(t, bin, url, "vmB"), newHost(t, bin, url, "vmC")

	// Every run of the story falls in one minute of the record's clock: start it 2 s to
	// 35 s into a minute (a wait for a state of the clock, as cron's own ticks are).
	switch s := time.Since(time.Now().Truncate(time.Minute)); {
	case s < 2*time.Second:
		time.Sleep(2*time.Second - s)
	case s > 35*time.Second:
		time.Sleep(time.Minute + 2*time.Second - s)
	}
	sched := []string{"--schedule", "* * * * *", "--tz", "UTC"}

	// A roll-out: vmA runs the line with --schedule, vmB still without: DUPLICATE.
	a.run(0, append(append([]string{"run", "-k", "billing"}, sched...), "--", "true")...)
	b.run(0, "run", "-k", "billing", "--", "true")
	// Seconds after its tick with a 1 s start deadline: missed.
	c.run(0, append(append([]string{"run", "-k", "nightly"}, sched...), "--start-deadline", "1s", "--", "true")...)

	// vmA runs the reports tick and is killed; vmB's standby takes the tick over.
	id := filepath.Join(a.dir, "id")
	job := a.command(append(append([]string{"run", "-k", "reports", "--ttl", "2s", "--grace", "200ms"}, sched...),
		"--", "sh", "-c", `echo "$CRONLOCK_RUN_ID" > `+id+`.tmp; mv `+id+`.tmp `+id+`; exec sleep 60`)...)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFile(t, id)
	lost, _ := os.ReadFile(id)
	standby := b.command(append(append([]string{"run", "-v", "-k", "reports", "--ttl", "2s", "--standby"}, sched...), "--", "true")...)
	pipe, _ := standby.StderrPipe()
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() && !strings.Contains(sc.Text(), "standby") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	job.Process.Signal(syscall.SIGKILL) // cronlock's guard takes the job with it
	job.Wait()
	if err := standby.Wait(); err != nil {
		t.Fatalf("vmB's standby: %v", err)
	}

	// vmC suspends the cleanup job; vmA's run of its tick is suspended, on every host.
	c.run(0, "suspend", "-k", "cleanup", "--reason", "maintenance window")
	a.run(0, append(append([]string{"run", "-k", "cleanup"}, sched...), "--", "true")...)

	page := filepath.Join(c.dir, "fleet.html")
	c.run(0, "report", "--fleet", "--html", page, "--since", "1h")

	br := startBrowser(t, 1400, 500)
	br.open(page)
	var got map[string]int
	br.eval(`(function(){var m={};["#tl rect.s-succeeded","#tl rect.s-missed","#tl rect.s-abandoned","#tl .mark-dup",
		"#tl .mark-missed","#tl .mark-takeover","#tl rect.tk","#tl rect.s-suspended","#tl .mark-suspended"].forEach(function(s){m[s]=document.querySelectorAll(s).length});return m})()`, &got)
	want := map[string]int{"#tl rect.s-succeeded": 3, "#tl rect.s-missed": 1, "#tl rect.s-abandoned": 1,
		"#tl .mark-dup": 2, "#tl .mark-missed": 1, "#tl .mark-takeover": 1, "#tl rect.tk": 1,
		"#tl rect.s-suspended": 1, "#tl .mark-suspended": 1}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("%d of %s, want %d", got[s], s, n)
		}
	}
	var box struct{ X, Y float64 }
	br.eval(`(function(){var r=document.querySelector("#tl rect.tk");if(!r)return {X:0,Y:0};r.scrollIntoView({block:"center",inline:"center"});
		var bb=r.getBoundingClientRect();return {X:bb.left+bb.width/2,Y:bb.top+bb.height/2}})()`, &box)
	br.hover(box.X, box.Y)
	var cardText string
	br.eval(`document.getElementById("card").innerText`, &cardText)
	if want := "Took over\n" + strings.TrimSpace(string(lost)); !strings.Contains(cardText, want) || !strings.Contains(cardText, "vmB") {
		t.Errorf("the takeover's card lacks %q and vmB:\n%s", want, cardText)
	}
	if p := br.Problems(); len(p) > 0 {
		t.Errorf("console errors or exceptions:\n%s", strings.Join(p, "\n"))
	}
}
