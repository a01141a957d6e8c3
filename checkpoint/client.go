package checkpoint

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ReplyError is a reply other than StatusOK and StatusNone: the run refused the request
// (StatusRefused), its backend failed (StatusError), or the request was bad.
type ReplyError struct {
	Status Status
	Msg    string
}

func (e *ReplyError) Error() string { return e.Msg }

// UnreachableError is a request that could not connect to the run: nothing was sent,
// so nothing was saved.
type UnreachableError struct {
	Path string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach this job's cronlock run at %s: %v (has the run ended?)", e.Path, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Client talks to the run whose socket is Path.
type Client struct {
	Path string
	// Timeout bounds one request, reply included; 0 = a minute (the run bounds its
	// backend call by its own operation time-out).
	Timeout time.Duration
}

// Save asks the run to store value. A *ReplyError says why it was not stored.
func (c *Client) Save(value []byte) error {
	_, _, err := c.do(OpSave, value)
	return err
}

// Load asks the run for this scope's newest checkpoint (lastSuccess: the newest of a
// succeeded run); found false when there is none.
func (c *Client) Load(lastSuccess bool) (value []byte, found bool, err error) {
	op := OpLoad
	if lastSuccess {
		op = OpLoadLastSuccess
	}
	st, v, err := c.do(op, nil)
	if err != nil {
		return nil, false, err
	}
	return v, st == StatusOK, nil
}

func (c *Client) do(op byte, payload []byte) (Status, []byte, error) {
	if len(payload) > maxFrame {
		return 0, nil, ErrTooLarge
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	conn, err := net.DialTimeout("unix", c.Path, timeout)
	if err != nil {
		return 0, nil, &UnreachableError{Path: c.Path, Err: err}
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	werr := writeFrame(conn, op, payload)
	// A server that refuses the peer answers before reading the request, and closes: the
	// write may then fail, but the answer says why.
	kind, reply, err := readFrame(conn)
	if err != nil && werr != nil {
		return 0, nil, fmt.Errorf("send to this job's cronlock run: %w", werr)
	}
	if errors.Is(err, errVersion) {
		return 0, nil, err
	}
	if err != nil {
		return 0, nil, fmt.Errorf("no reply from this job's cronlock run: %w", err)
	}
	switch st := Status(kind); st {
	case StatusOK, StatusNone:
		return st, reply, nil
	default:
		return st, nil, &ReplyError{Status: st, Msg: string(reply)}
	}
}
