// Package faultproxy is a small TCP proxy for fault-injection tests. It forwards every
// connection it accepts to one upstream address and, on command, degrades all of them:
//
//   - Pass: bytes go through at once;
//   - Latency: every chunk read is delivered d later (order kept), so a request and its
//     reply each take d longer;
//   - Blackhole: every chunk read is dropped, in both directions, while connections stay
//     open (a silent network partition); new connections are accepted and swallowed too;
//   - Reset: every open connection is closed with a TCP RST (SO_LINGER 0) on both sides,
//     and new connections are reset at once, until the mode changes;
//   - Partition (SetPartition): Blackhole for every connection except those whose client
//     a function keeps, which pass; so one proxy in front of a server can cut it off from
//     some clients (the Sentinels, the replicas) and not from others (one holder).
//
// It also records the request turns of every connection (Turns): the bytes a client sent
// between two replies, so a test can count round trips on the wire; and every chunk read
// from either side, in order (Chunks), for protocols such as HTTP/2 that interleave
// requests and replies on one connection.
//
// When the upstream cannot be dialled (the server is down) an accepted connection is
// closed at once. It is for tests only: no throughput tricks, one goroutine per direction
// plus one per direction for delayed delivery.
package faultproxy

import (
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does to the bytes it forwards.
type Mode int

// The modes; see the package comment.
const (
	Pass Mode = iota
	Latency
	Blackhole
	Reset
	Partition
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Latency:
		return "latency"
	case Blackhole:
		return "blackhole"
	case Reset:
		return "reset"
	case Partition:
		return "partition"
	}
	return "mode?"
}

// Proxy forwards connections from Addr to an upstream address. Its zero value is not
// usable: call Start. It is safe for concurrent use.
type Proxy struct {
	Addr string // host:port the proxy listens on (127.0.0.1)

	upstream string
	ln       net.Listener

	mu     sync.Mutex
	mode   Mode
	delay  time.Duration
	keep   func(client *net.TCPAddr) bool // Partition's: the clients that pass
	links  map[*link]struct{}
	closed bool
	turns  []Turn
	chunks []Chunk
	nlinks int
	wg     sync.WaitGroup
}

// link is one proxied connection: the client's side and the upstream's.
type link struct {
	client, server *net.TCPConn
	once           sync.Once
	id             int
	turn           int  // index in Proxy.turns of this link's open turn, -1 when none
	replied        bool // the server spoke since the open turn began
	kept           bool // Partition lets this link's bytes through
}

// Turn is one request turn: what a client sent before it read a reply, so one round trip
// (a pipeline is one turn). Conn numbers the connection in accept order, from 1.
type Turn struct {
	Conn int
	Data []byte
}

// Turns returns a copy of every request turn so far, in order.
func (p *Proxy) Turns() []Turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Turn, len(p.turns))
	for i, t := range p.turns {
		out[i] = Turn{Conn: t.Conn, Data: append([]byte(nil), t.Data...)}
	}
	return out
}

// Chunk is what the proxy read from one side of connection Conn at once: from the client
// (FromClient) or from the server. Chunks keep the order in which the proxy read them, both
// directions together, so a test can tell a request sent before a reply came (pipelined,
// or multiplexed as HTTP/2 does) from one that waited for it.
type Chunk struct {
	Conn       int
	FromClient bool
	Data       []byte
}

// Chunks returns a copy of every chunk read so far, in order.
func (p *Proxy) Chunks() []Chunk {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Chunk, len(p.chunks))
	for i, c := range p.chunks {
		out[i] = Chunk{Conn: c.Conn, FromClient: c.FromClient, Data: append([]byte(nil), c.Data...)}
	}
	return out
}

// record notes data read from the client (fromClient) or the server on l.
func (p *Proxy) record(l *link, data []byte, fromClient bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.chunks = append(p.chunks, Chunk{Conn: l.id, FromClient: fromClient, Data: append([]byte(nil), data...)})
	if !fromClient {
		l.replied = true
		return
	}
	if l.turn < 0 || l.replied {
		p.turns = append(p.turns, Turn{Conn: l.id})
		l.turn, l.replied = len(p.turns)-1, false
	}
	p.turns[l.turn].Data = append(p.turns[l.turn].Data, data...)
}

// close closes both sides, with a RST when rst is set.
func (l *link) close(rst bool) {
	l.once.Do(func() {
		for _, c := range []*net.TCPConn{l.client, l.server} {
			if rst {
				c.SetLinger(0)
			}
			c.Close()
		}
	})
}

// Start listens on a free loopback port and forwards to upstream (host:port) in Pass mode.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Set switches the mode; delay is used by Latency only. Entering Reset resets every open
// connection at once. Leaving Partition resets the connections it black-holed: their
// streams lost bytes that a real network would have sent again, so neither side may go on
// reading replies that do not match its requests.
func (p *Proxy) Set(m Mode, delay time.Duration) {
	p.mu.Lock()
	var reset []*link
	for l := range p.links {
		if m == Reset || (p.mode == Partition && m != Partition && !l.kept) {
			reset = append(reset, l)
		}
	}
	p.mode, p.delay, p.keep = m, delay, nil
	p.mu.Unlock()
	for _, l := range reset {
		l.close(true)
	}
}

// SetPartition switches to Partition: from now on only the connections whose client keep
// accepts pass, every other one is black-holed. keep is asked once for each open
// connection now and for each new one when it is accepted, with the client's address (a
// test finds the process behind it with proctest.SocketPID). Set ends the partition.
func (p *Proxy) SetPartition(keep func(client *net.TCPAddr) bool) {
	// keep is set first, so that a connection accepted from now on is judged by the
	// acceptor, and the mode last, so that no byte of a kept one is dropped meanwhile.
	p.mu.Lock()
	p.keep = keep
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	kept := make(map[*link]bool, len(links))
	for _, l := range links {
		kept[l] = keep(l.client.RemoteAddr().(*net.TCPAddr))
	}
	p.mu.Lock()
	for l, k := range kept {
		l.kept = k
	}
	p.mode, p.delay = Partition, 0
	p.mu.Unlock()
}

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	var all []*link
	for l := range p.links {
		all = append(all, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range all {
		l.close(false)
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) current() (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay
}

// modeOf is the mode for l's bytes now: a partition passes the links it keeps.
func (p *Proxy) modeOf(l *link) (Mode, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == Partition {
		if l.kept {
			return Pass, 0
		}
		return Blackhole, 0
	}
	return p.mode, p.delay
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		client := c.(*net.TCPConn)
		if m, _ := p.current(); m == Reset {
			client.SetLinger(0)
			client.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.upstream, time.Second)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{client: client, server: s.(*net.TCPConn), turn: -1}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.close(false)
			continue
		}
		p.nlinks++
		l.id = p.nlinks
		p.links[l] = struct{}{}
		keep := p.keep // read with the link added: SetPartition judges it, or this does
		p.mu.Unlock()
		if keep != nil {
			kept := keep(client.RemoteAddr().(*net.TCPAddr))
			p.mu.Lock()
			l.kept = kept
			p.mu.Unlock()
		}
		p.wg.Add(2)
		go p.pipe(l, l.client, l.server)
		go p.pipe(l, l.server, l.client)
	}
}

// chunk is data read from one side, due for delivery to the other at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies from src to dst through a queue that applies the mode at read time. The
// first error on either side closes the whole link.
func (p *Proxy) pipe(l *link, src, dst *net.TCPConn) {
	defer p.wg.Done()
	q := make(chan chunk, 256)
	done := make(chan struct{})
	go func() { // the writer: delivers chunks in order, each at its due time
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				l.close(false)
				for range q { // drain so the reader never blocks on a dead link
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.record(l, buf[:n], src == l.client)
			m, delay := p.modeOf(l)
			switch m {
			case Blackhole, Reset:
				// swallowed (Reset closes the link anyway)
			default:
				due := time.Now()
				if m == Latency {
					due = due.Add(delay)
				}
				q <- chunk{data: append([]byte(nil), buf[:n]...), due: due}
			}
		}
		if err != nil {
			break
		}
	}
	close(q)
	<-done
	l.close(false)
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}
