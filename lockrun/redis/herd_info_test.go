package redis

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"cronlock/internal/redistest"
	"cronlock/lockrun/redis/conn"
)

// herdServer is the URL BenchmarkHerd runs against: CRONLOCK_BENCH_REDIS_URL, else a
// private server, Sentinel deployment (a master, a replica, three Sentinels) or
// three-master Cluster, as CRONLOCK_BENCH_HERD_FORM says.
func herdServer(b testing.TB) string {
	if url := os.Getenv("CRONLOCK_BENCH_REDIS_URL"); url != "" {
		return url
	}
	room := []string{"--maxclients", "19000", "--tcp-backlog", "4096"}
	switch form := os.Getenv("CRONLOCK_BENCH_HERD_FORM"); form {
	case "", "plain":
		return "redis://" + redistest.Start(b, room...).Addr + "/0"
	case "sentinel":
		d := redistest.StartSentinel(b, room...)
		d.WaitFailoverReady()
		return d.URL()
	case "cluster":
		return redistest.StartClusterReplicas(b, 0, room...).URL()
	default:
		b.Fatalf("CRONLOCK_BENCH_HERD_FORM=%q: want plain, sentinel or cluster", form)
	}
	return ""
}

// infoReader reads the CPU time and command counts of the servers that hold the data
// (one server, the Sentinels' master, or every master of a Cluster), and the Sentinels'
// CPU time, each from its own connection. The URL's password is the data servers';
// Sentinels that have one of their own get it from CRONLOCK_BENCH_SENTINEL_PASSWORD.
type infoReader struct {
	data      []infoClient
	sentinels []*redis.Client
}

// infoClient is a client whose INFO infoReader reads.
type infoClient interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
	Close() error
}

func newInfoReader(url string) (*infoReader, error) {
	t, err := conn.ParseURL(url)
	if err != nil {
		return nil, err
	}
	client := func(addr, password string) *redis.Client {
		return redis.NewClient(&redis.Options{Network: t.Network, Addr: addr, Username: t.Username,
			Password: password, TLSConfig: t.TLSConfig(), Protocol: 2, DisableIdentity: true})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch t.Scheme {
	case conn.SchemeSentinel:
		// The master is the one the Sentinels name at each dial, as for the locker.
		o := conn.Options{Timeout: 5 * time.Second, SentinelPassword: os.Getenv("CRONLOCK_BENCH_SENTINEL_PASSWORD")}
		r := &infoReader{data: []infoClient{conn.New(t, o)}}
		for _, a := range t.Addrs {
			r.sentinels = append(r.sentinels, redis.NewClient(&redis.Options{Addr: a, Password: o.SentinelPassword, Protocol: 2, DisableIdentity: true}))
		}
		return r, nil
	case conn.SchemeCluster:
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: t.Addrs, Username: t.Username, Password: t.Password,
			Protocol: 2, DisableIdentity: true, DisableRoutingPolicies: true})
		defer cc.Close()
		r := &infoReader{}
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			r.data = append(r.data, client(c.Options().Addr, t.Password))
			return nil
		})
		return r, err
	}
	return &infoReader{data: []infoClient{client(t.Addr, t.Password)}}, nil
}

func (r *infoReader) Close() error {
	for _, c := range r.data {
		c.Close()
	}
	for _, c := range r.sentinels {
		c.Close()
	}
	return nil
}

// redisStats is a snapshot of INFO cpu and commandstats, summed over the data servers.
type redisStats struct {
	cpu         float64 // used_cpu_user + used_cpu_sys, seconds
	sentinelCPU float64 // the same for the Sentinels
	calls       int64   // commands sent by clients (a script's inner ones excluded)
	cmds        map[string][2]float64
}

// scriptInner are commands that the scripts call: INFO commandstats counts those too.
var scriptInner = map[string]bool{"get": true, "set": true, "time": true, "del": true, "publish": true,
	"lpush": true, "ltrim": true, "pexpire": true, "lrange": true, "pttl": true, "expire": true, "info": true,
	"lindex": true, "lset": true, "hset": true, "hsetnx": true, "hget": true, "hmget": true, "hdel": true,
	"hexists": true, "hincrby": true, "hkeys": true, "zadd": true, "zcard": true, "zrange": true, "zrem": true} // the ledger

func (r *infoReader) read() (redisStats, error) {
	s := redisStats{cmds: map[string][2]float64{}}
	for _, c := range r.data {
		if err := s.add(c, "cpu", "commandstats"); err != nil {
			return s, err
		}
	}
	var st redisStats
	for _, c := range r.sentinels {
		if err := st.add(c, "cpu"); err != nil {
			return s, fmt.Errorf("sentinel %s: %w", c.Options().Addr, err)
		}
	}
	s.sentinelCPU = st.cpu
	return s, nil
}

// add adds one server's INFO sections to s.
func (s *redisStats) add(c infoClient, sections ...string) error {
	text, err := c.Info(context.Background(), sections...).Result()
	if err != nil {
		return err
	}
	if s.cmds == nil {
		s.cmds = map[string][2]float64{}
	}
	for _, line := range strings.Split(text, "\r\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_cpu_user" || name == "used_cpu_sys":
			f, _ := strconv.ParseFloat(val, 64)
			s.cpu += f
		case strings.HasPrefix(name, "cmdstat_"):
			cmd := strings.TrimPrefix(name, "cmdstat_")
			var calls, usec float64
			for _, kv := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					calls = f
				case "usec":
					usec = f
				}
			}
			prev := s.cmds[cmd]
			s.cmds[cmd] = [2]float64{prev[0] + calls, prev[1] + usec}
			if !scriptInner[cmd] {
				s.calls += int64(calls)
			}
		}
	}
	return nil
}
