package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
)

// memHandler keeps one value, or refuses or fails every save.
type memHandler struct {
	mu     sync.Mutex
	v      []byte
	refuse string
	fail   error
}

func (h *memHandler) Save(_ context.Context, v []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse != "" {
		return &RefusedError{Reason: h.refuse}
	}
	if h.fail != nil {
		return h.fail
	}
	h.v = append([]byte{}, v...)
	return nil
}

func (h *memHandler) Load(_ context.Context, last bool) ([]byte, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return nil, false, h.fail
	}
	return h.v, h.v != nil, nil
}

// self allows this test process, which is no descendant of itself.
func self(pid, uid int) bool { return pid == os.Getpid() && uid == os.Getuid() }

func TestSaveLoad(t *testing.T) {
	h := &memHandler{}
	s, err := Listen(h, self)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := &Client{Path: s.Path()}
	if s.WasUsed() {
		t.Fatal("used before any request")
	}
	if _, found, err := c.Load(false); found || err != nil {
		t.Fatalf("load of nothing: %v, %v", found, err)
	}
	if !s.WasUsed() {
		t.Fatal("not used after a load")
	}
	for _, v := range [][]byte{[]byte("pos-1"), {}, bytes.Repeat([]byte{0, 0xff, '\n'}, 1000)} {
		if err := c.Save(v); err != nil {
			t.Fatal(err)
		}
		if got, found, err := c.Load(false); !found || err != nil || !bytes.Equal(got, v) {
			t.Fatalf("load: %q, %v, %v; want %q", got, found, err, v)
		}
	}
	if err := c.Save(make([]byte, 64<<10+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("65537 bytes: %v, want ErrTooLarge", err)
	}
	h.refuse = "not yours"
	var re *ReplyError
	if err := c.Save([]byte("x")); !errors.As(err, &re) || re.Status != StatusRefused || re.Msg != "not yours" {
		t.Fatalf("refused save: %v", err)
	}
	h.refuse, h.fail = "", errors.New("backend down")
	if _, _, err := c.Load(false); !errors.As(err, &re) || re.Status != StatusError {
		t.Fatalf("failed load: %v", err)
	}
}

// A peer the server does not allow gets a refusal and nothing else; a frame of another
// version or over the limit is answered as a bad request, never read into memory.
func TestRefusalsAndBadFrames(t *testing.T) {
	h := &memHandler{v: []byte("secret")}
	s, err := Listen(h, func(pid, uid int) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	var re *ReplyError
	if _, _, err := (&Client{Path: s.Path()}).Load(false); !errors.As(err, &re) || re.Status != StatusRefused ||
		!strings.Contains(re.Msg, "not a process of this run's job") {
		t.Fatalf("load from a refused peer: %v", err)
	}
	s.Close()
	if s.WasUsed() {
		t.Fatal("a refused peer counted as a use")
	}

	s, err = Listen(h, self)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, frame := range map[string][]byte{
		"version 2": append([]byte("CKPT\x02\x02"), 0, 0, 0, 0),
		"too large": binary.BigEndian.AppendUint32([]byte("CKPT\x01\x01"), 1<<30),
		"not ours":  []byte("GET / HTTP/1.0\r\n\r\n"),
	} {
		conn, err := net.Dial("unix", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(frame)
		kind, _, err := readFrame(conn)
		conn.Close()
		if err != nil || Status(kind) != StatusBadRequest {
			t.Fatalf("%s: reply %d, %v; want a bad request", name, kind, err)
		}
	}
}

// The server's name is gone once it is closed.
func TestCloseFreesName(t *testing.T) {
	s, err := Listen(&memHandler{}, self)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, _, err := (&Client{Path: s.Path()}).Load(false); err == nil || !strings.Contains(err.Error(), "has the run ended") {
		t.Fatalf("load after Close: %v", err)
	}
	// A save that could not even connect says that nothing was saved, not "may or may not".
	if code, msg := Save(s.Path(), []string{"x"}, nil); code != ExitTempFail || !strings.Contains(msg, "nothing was saved") || !strings.Contains(msg, "has the run ended") {
		t.Fatalf("save after Close: %d, %q; want 75 saying nothing was saved", code, msg)
	}
}
