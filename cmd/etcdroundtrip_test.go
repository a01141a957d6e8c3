//go:build etcd

package cmd

import (
	"encoding/binary"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"cronlock/internal/etcdtest"
	"cronlock/internal/faultproxy"
)

// h2Preface opens every HTTP/2 connection a client makes.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// etcdWaves reads the HTTP/2 frames in chunks (one etcd client's connections through a
// faultproxy) and returns the gRPC methods it called, grouped into waves: a wave begins
// with a request sent while no earlier request was waiting for its answer, so each wave is
// one round trip however many requests travel in it (HTTP/2 multiplexes them).
func etcdWaves(t *testing.T, chunks []faultproxy.Chunk) [][]string {
	t.Helper()
	type side struct {
		buf      []byte
		preface  bool
		dec      *hpack.Decoder
		block    []byte // a header block continued in CONTINUATION frames
		blockSID uint32
	}
	sides := map[[2]int]*side{}
	waiting := map[[2]uint32]bool{} // conn, stream: a request not answered yet
	seen := map[[2]uint32]bool{}
	var waves [][]string
	start := func(conn, sid uint32, block []byte, dec *hpack.Decoder) {
		key := [2]uint32{conn, sid}
		if seen[key] {
			return // the trailers of a request
		}
		seen[key] = true
		fields, err := dec.DecodeFull(block)
		if err != nil {
			t.Fatalf("HPACK: %v", err)
		}
		method := "?"
		for _, f := range fields {
			if f.Name == ":path" {
				method = path.Base(f.Value)
			}
		}
		if len(waiting) == 0 {
			waves = append(waves, nil)
		}
		waves[len(waves)-1] = append(waves[len(waves)-1], method)
		waiting[key] = true
	}
	for _, ch := range chunks {
		dir := 0
		if ch.FromClient {
			dir = 1
		}
		k := [2]int{ch.Conn, dir}
		s := sides[k]
		if s == nil {
			s = &side{dec: hpack.NewDecoder(4096, nil)}
			sides[k] = s
		}
		s.buf = append(s.buf, ch.Data...)
		if ch.FromClient && !s.preface {
			if len(s.buf) < len(h2Preface) {
				continue
			}
			if string(s.buf[:len(h2Preface)]) != h2Preface {
				t.Fatalf("connection %d does not speak HTTP/2", ch.Conn)
			}
			s.buf, s.preface = s.buf[len(h2Preface):], true
		}
		for len(s.buf) >= 9 {
			n := int(s.buf[0])<<16 | int(s.buf[1])<<8 | int(s.buf[2])
			if len(s.buf) < 9+n {
				break
			}
			typ, flags, sid := s.buf[3], s.buf[4], binary.BigEndian.Uint32(s.buf[5:9])&0x7fffffff
			payload := s.buf[9 : 9+n]
			s.buf = s.buf[9+n:]
			key := [2]uint32{uint32(ch.Conn), sid}
			switch {
			case ch.FromClient && (typ == 0x1 || typ == 0x9): // HEADERS, CONTINUATION
				if typ == 0x1 {
					if flags&0x8 != 0 { // PADDED
						payload = payload[1 : len(payload)-int(payload[0])]
					}
					if flags&0x20 != 0 { // PRIORITY
						payload = payload[5:]
					}
					s.block, s.blockSID = nil, sid
				}
				s.block = append(s.block, payload...)
				if flags&0x4 != 0 { // END_HEADERS
					start(uint32(ch.Conn), s.blockSID, s.block, s.dec)
				}
			case ch.FromClient && typ == 0x3: // RST_STREAM: the client gave up the request
				delete(waiting, key)
			case !ch.FromClient && (typ == 0x0 || typ == 0x1 || typ == 0x3): // an answer
				delete(waiting, key)
			}
		}
	}
	return waves
}

// wavesString is waves as "A | B+C": the methods of one wave sorted, the waves in order.
func wavesString(waves [][]string) string {
	var out []string
	for _, w := range waves {
		w = slices.Clone(w)
		slices.Sort(w)
		out = append(out, strings.Join(w, "+"))
	}
	return strings.Join(out, " | ")
}

// TestEtcdShortRunRoundTrips counts, on the wire (HTTP/2 frames through a faultproxy),
// the round trips of a short run on etcd, with and without --schedule: one read of the
// lock and the tick; the lease grant together with the transaction that creates the lock,
// claims the tick and writes the run's entry in the fleet's record (running); the
// release's transaction, which completes the entry, together with the lease's revoke.
// Three round trips, five requests; etcdctl lock makes three and three. The cluster may
// apply the transaction before the grant it travelled with (its handlers race): it is then
// refused whole and sent again, a fourth round trip.
func TestEtcdShortRunRoundTrips(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{})
	p, err := faultproxy.Start(strings.TrimPrefix(srv.Endpoint, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Every chunk arrives 50ms late, each way: no answer can come back within 100ms of its
	// request, so requests a run sends together are seen together however a busy machine
	// schedules its goroutines (this is the shape of the exchange, not its speed).
	p.Set(faultproxy.Latency, 50*time.Millisecond)
	c := newCLI(t, "")
	c.env = append(c.env, "CRONLOCK_BACKEND=etcd", "CRONLOCK_ETCD_ENDPOINTS=http://"+p.Addr)
	const want, overtaken = "Txn | LeaseGrant+Txn | LeaseRevoke+Txn", "Txn | LeaseGrant+Txn | Txn | LeaseRevoke+Txn"
	for _, args := range [][]string{
		{"run", "-k", "rt", "--", "true"},
		{"run", "-k", "rt", "--schedule", "* * * * *", "--", "true"},
	} {
		n := len(p.Chunks())
		if code, _, errs := c.run(args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		got := wavesString(etcdWaves(t, p.Chunks()[n:]))
		t.Logf("%v: %s", args, got)
		if got != want && got != overtaken {
			t.Errorf("%v: round trips %q; want %q (or, when the cluster applied the transaction before its grant, %q)", args, got, want, overtaken)
		}
	}
	// A run skipped because the lock is held: one read.
	holder, errb, release := c.startHolding([]string{"run", "-k", "rt"})
	n := len(p.Chunks())
	if code, _, errs := c.run("run", "-k", "rt", "--", "true"); code != 0 {
		t.Fatalf("skipped run: exit %d: %s", code, errs)
	}
	if got := wavesString(etcdWaves(t, p.Chunks()[n:])); got != "Txn" {
		t.Errorf("a run that finds the lock held: round trips %q; want one read (Txn)", got)
	}
	release()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v, %s", err, errb)
	}
}
