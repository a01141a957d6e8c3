// Package checkpoint is the private channel between a job's `cronlock checkpoint`
// commands and their own parent `cronlock run`: a unix socket in Linux's abstract
// namespace, under a random name that the run puts in the job's environment
// (CRONLOCK_CHECKPOINT_SOCKET) and that vanishes with the run, however it ends. The parent
// writes checkpoints with its own backend connection and token, so neither a secret nor a
// backend setting enters the job's environment, and the local backend's flock stays the
// parent's.
//
// The server answers only peers whose SO_PEERCRED uid is the run's and whose pid is a
// descendant of the run's process (the job, its children, and what it left behind under
// cronlock as child subreaper): other users, and this user's other processes, are
// refused. A job that moves itself into another network namespace cannot reach it.
//
// Protocol, version 1. One request per connection, one reply, then the connection is
// closed. Each message is a frame:
//
//	magic "CKPT" | version byte (1) | kind byte | length uint32, big endian | payload
//
// A request's kind is OpSave (payload: the value, at most lockrun.MaxCheckpoint bytes),
// OpLoad or OpLoadLastSuccess (empty payload). A reply's kind is a Status: StatusOK
// (payload: the loaded value, or empty after a save), StatusNone (no checkpoint),
// StatusRefused (the run no longer holds the lock, or its lease is in doubt; payload:
// why), StatusError (the backend failed; payload: why), StatusBadRequest (payload: why).
// A frame of another version is answered StatusBadRequest, so a client and server of
// two cronlock versions fail with a line rather than misread each other.
//
// The package knows no backend: the server calls a Handler, which jobrun implements
// with the run's lease.
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"cronlock/lockrun"
)

// Version is the protocol's version, sent in every frame.
const Version = 1

// magic starts every frame.
const magic = "CKPT"

// Request kinds.
const (
	OpSave            byte = 1
	OpLoad            byte = 2
	OpLoadLastSuccess byte = 3
)

// Status is a reply's kind.
type Status byte

// Reply kinds.
const (
	StatusOK         Status = 0
	StatusNone       Status = 1
	StatusRefused    Status = 2
	StatusError      Status = 3
	StatusBadRequest Status = 4
)

// maxFrame bounds a frame's payload: a value plus nothing, or a message.
const maxFrame = lockrun.MaxCheckpoint

// headerLen is the frame header's size: magic, version, kind, length.
const headerLen = len(magic) + 1 + 1 + 4

// ErrTooLarge is returned for a value over lockrun.MaxCheckpoint bytes.
var ErrTooLarge = fmt.Errorf("checkpoint: a checkpoint holds at most %d bytes (64 KiB): save a position (an id, an offset, a page token), not the data", lockrun.MaxCheckpoint)

// errVersion is a frame of another protocol version.
var errVersion = errors.New("checkpoint: the other side speaks another protocol version (a cronlock binary of another version): run the job's cronlock checkpoint with the same binary as cronlock run")

// writeFrame sends one frame.
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	if len(payload) > maxFrame {
		return ErrTooLarge
	}
	buf := make([]byte, headerLen, headerLen+len(payload))
	copy(buf, magic)
	buf[4] = Version
	buf[5] = kind
	binary.BigEndian.PutUint32(buf[6:], uint32(len(payload)))
	_, err := w.Write(append(buf, payload...))
	return err
}

// readFrame reads one frame; a payload over maxFrame is ErrTooLarge, read no further.
func readFrame(r io.Reader) (kind byte, payload []byte, err error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if string(h[:4]) != magic {
		return 0, nil, errors.New("checkpoint: not a cronlock checkpoint frame")
	}
	if h[4] != Version {
		return h[5], nil, errVersion
	}
	n := binary.BigEndian.Uint32(h[6:])
	if n > maxFrame {
		return h[5], nil, ErrTooLarge
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return h[5], payload, nil
}
