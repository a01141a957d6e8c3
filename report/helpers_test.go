package report_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// browser is a headless Chromium driven over the DevTools protocol on a pipe (fds 3 and
// 4: --remote-debugging-pipe), by a small client written here: no port, no library
// linked anywhere, and no network (every name fails to resolve, every connection goes
// to a closed loopback port).
type browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	w       *os.File
	session string

	mu       sync.Mutex
	next     int
	pending  map[int]chan cdpMsg
	problems []string      // console errors, exceptions, failed loads
	loaded   chan struct{} // Page.loadEventFired
	done     chan struct{} // the pipe closed
}

type cdpMsg struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// chromiumPath finds Debian's chromium; without it the test skips, or fails under CI.
func chromiumPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/test.sh installs Debian's chromium package)")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// startBrowser starts a private headless Chromium with a page of width×height and
// attaches to it.
func startBrowser(t testing.TB, width, height int) *browser {
	path := chromiumPath(t)
	dir := t.TempDir()
	args := []string{
		"--headless", "--disable-gpu", "--remote-debugging-pipe",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-breakpad", "--no-pings", "--mute-audio",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
		"--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", width, height),
	}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // Chromium refuses root with its sandbox
	}
	args = append(args, "about:blank")
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	in, toBrowser, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowser, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{in, out} // fd 3: what it reads, fd 4: what it writes
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	in.Close()
	out.Close()
	b := &browser{t: t, cmd: cmd, w: toBrowser, pending: map[int]chan cdpMsg{},
		loaded: make(chan struct{}, 1), done: make(chan struct{})}
	go b.read(fromBrowser)
	t.Cleanup(func() {
		b.call("", "Browser.close", nil, nil)
		toBrowser.Close()
		waited := make(chan struct{})
		go func() { cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second): // a stuck browser must not outlive the test
			cmd.Process.Kill()
			<-waited
		}
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("chromium's stderr:\n%s", lastLines(stderr.String(), 20))
		}
	})
	var created struct {
		TargetID string `json:"targetId"`
	}
	b.must("", "Target.createTarget", map[string]any{"url": "about:blank"}, &created)
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	b.must("", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		b.must(b.session, m, nil, nil)
	}
	b.must(b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil)
	return b
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// read routes the browser's messages: replies to their callers, events to the
// problems list and the load signal.
func (b *browser) read(r *os.File) {
	defer close(b.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMsg
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				ch <- m
			}
			b.mu.Unlock()
			continue
		}
		switch m.Method {
		case "Page.loadEventFired":
			select {
			case b.loaded <- struct{}{}:
			default:
			}
		case "Runtime.exceptionThrown":
			b.problems = append(b.problems, "exception: "+string(m.Params))
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string `json:"type"`
			}
			json.Unmarshal(m.Params, &p)
			if p.Type == "error" || p.Type == "assert" || p.Type == "warning" {
				b.problems = append(b.problems, "console "+p.Type+": "+string(m.Params))
			}
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Level string `json:"level"`
				} `json:"entry"`
			}
			json.Unmarshal(m.Params, &p)
			if p.Entry.Level == "error" || p.Entry.Level == "warning" {
				b.problems = append(b.problems, "log: "+string(m.Params))
			}
		}
		b.mu.Unlock()
	}
}

// call sends one command and waits for its reply (or the browser's end), decoding the
// result into out when not nil.
func (b *browser) call(session, method string, params any, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMsg, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: chromium closed the pipe", method)
	}
}

func (b *browser) must(session, method string, params any, out any) {
	b.t.Helper()
	if err := b.call(session, method, params, out); err != nil {
		b.t.Fatal(err)
	}
}

// open loads path and waits for its load event.
func (b *browser) open(path string) {
	b.t.Helper()
	select { // a load event left from about:blank
	case <-b.loaded:
	default:
	}
	b.must(b.session, "Page.navigate", map[string]any{"url": "file://" + path}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	select {
	case <-b.loaded:
	case <-b.done:
		b.t.Fatal("chromium ended while loading the page")
	case <-ctx.Done(): // a hang, not a speed judgement: the benchmark measures speed
		b.t.Fatal("the page never finished loading")
	}
}

// eval runs a JavaScript expression in the page and decodes its value into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	b.must(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if res.ExceptionDetails != nil {
		b.t.Fatalf("%s threw: %s", expr, res.ExceptionDetails)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			b.t.Fatalf("%s: %v (value %s)", expr, err, res.Result.Value)
		}
	}
}

// hover moves the mouse to (x, y) of the viewport.
func (b *browser) hover(x, y float64) {
	b.t.Helper()
	b.must(b.session, "Input.dispatchMouseEvent", map[string]any{"type": "mouseMoved", "x": x, "y": y}, nil)
}

// screenshot returns a PNG of the viewport.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var res struct {
		Data string `json:"data"`
	}
	b.must(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &res)
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		b.t.Fatal(err)
	}
	return png
}

// Problems returns the console errors, warnings and exceptions seen so far.
func (b *browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}
