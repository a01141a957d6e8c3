package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"cronlock/procfs"
)

// Handler does what the job asks, for the run that owns the server.
type Handler interface {
	// Save stores value. A *RefusedError means nothing was written and the job must
	// stop; any other error means the outcome is unknown.
	Save(ctx context.Context, value []byte) error
	// Load returns this scope's newest value (or, with lastSuccess, that of the newest
	// succeeded run); found false when there is none.
	Load(ctx context.Context, lastSuccess bool) (value []byte, found bool, err error)
}

// RefusedError is a save the run refused: its lock is no longer its own, or its lease is
// in doubt. Nothing was written.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Server is one run's checkpoint socket.
type Server struct {
	path string
	ln   *net.UnixListener
	h    Handler
	// allow decides whether a peer (its pid and uid, from SO_PEERCRED) may talk to the run.
	allow func(pid, uid int) bool

	wg   sync.WaitGroup
	used sync.Once
	use  chan struct{} // closed at the first request a peer was allowed to make
}

// Listen creates the run's socket and serves h on it until Close, to the peers that
// allow accepts (nil = AllowDescendants).
//
// The socket is in Linux's abstract namespace, under a random name of 128 bits: it has no
// file, so it costs a run no folder to create and remove (a quarter of a millisecond on a
// journalled /tmp) and vanishes with the process even after a SIGKILL. Any process of the
// machine's network namespace could connect to such a name if it knew it, so the peer
// check (SO_PEERCRED: the uid, and a pid descending from this process) is what lets a
// request in.
func Listen(h Handler, allow func(pid, uid int) bool) (*Server, error) {
	if allow == nil {
		allow = AllowDescendants
	}
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("checkpoint socket: %w", err)
	}
	path := "@cronlock-ckpt-" + hex.EncodeToString(rnd[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("checkpoint socket %s: %w", path, err)
	}
	s := &Server{path: path, ln: ln, h: h, allow: allow, use: make(chan struct{})}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Path is the socket's path, for the job's environment.
func (s *Server) Path() string { return s.path }

// Used is closed once a peer was allowed to make a request: the run then marks its
// checkpoint as a succeeded run's when it succeeds, and a run that never used
// checkpoints pays nothing for them.
func (s *Server) Used() <-chan struct{} { return s.use }

// WasUsed reports whether Used is closed.
func (s *Server) WasUsed() bool {
	select {
	case <-s.use:
		return true
	default:
		return false
	}
}

// Close stops serving and waits for the requests in progress; the name is free again.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.handle(c)
		}()
	}
}

// requestTimeout bounds how long a peer may take to send its request.
const requestTimeout = 10 * time.Second

func (s *Server) handle(c *net.UnixConn) {
	pid, uid, err := peerCred(c)
	if err != nil {
		writeFrame(c, byte(StatusBadRequest), []byte(fmt.Sprintf("cannot identify the peer: %v", err)))
		return
	}
	if !s.allow(pid, uid) {
		writeFrame(c, byte(StatusRefused), []byte(fmt.Sprintf("refused: pid %d (uid %d) is not a process of this run's job", pid, uid)))
		return
	}
	c.SetReadDeadline(time.Now().Add(requestTimeout))
	op, payload, err := readFrame(c)
	if err != nil {
		writeFrame(c, byte(StatusBadRequest), []byte(err.Error()))
		return
	}
	c.SetReadDeadline(time.Time{})
	s.used.Do(func() { close(s.use) })
	ctx := context.Background()
	switch op {
	case OpSave:
		err := s.h.Save(ctx, payload)
		var ref *RefusedError
		switch {
		case errors.As(err, &ref):
			writeFrame(c, byte(StatusRefused), []byte(ref.Reason))
		case err != nil:
			writeFrame(c, byte(StatusError), []byte(err.Error()))
		default:
			writeFrame(c, byte(StatusOK), nil)
		}
	case OpLoad, OpLoadLastSuccess:
		v, found, err := s.h.Load(ctx, op == OpLoadLastSuccess)
		switch {
		case err != nil:
			writeFrame(c, byte(StatusError), []byte(err.Error()))
		case !found:
			writeFrame(c, byte(StatusNone), nil)
		default:
			writeFrame(c, byte(StatusOK), v)
		}
	default:
		writeFrame(c, byte(StatusBadRequest), []byte(fmt.Sprintf("unknown request %d", op)))
	}
}

// peerCred reads the connected peer's pid and uid (SO_PEERCRED: the kernel's record of
// who connected, not something the peer says).
func peerCred(c *net.UnixConn) (pid, uid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// AllowDescendants allows a peer of this process's uid that descends from this process
// (its parent chain in /proc reaches it): the job and whatever it started, including
// processes reparented to cronlock as child subreaper.
func AllowDescendants(pid, uid int) bool {
	if uid != os.Getuid() {
		return false
	}
	self := os.Getpid()
	for i := 0; i < 4096 && pid > 1; i++ {
		st, err := procfs.ReadStat(pid)
		if err != nil {
			return false
		}
		if st.PPID == self {
			return true
		}
		pid = st.PPID
	}
	return false
}
