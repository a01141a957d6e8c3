package cmd

import (
	"fmt"

	"github.com/spf13/pflag"

	"cronlock/lockrun/redis"
)

// Settings of the Sentinel and Cluster forms of the Redis backend, and --min-replicas.

const (
	minReplicasName      = "CRONLOCK_REDIS_MIN_REPLICAS"
	sentinelPasswordName = "CRONLOCK_REDIS_SENTINEL_PASSWORD_FILE"
	// maxMinReplicas bounds --min-replicas: no real deployment has more replicas, and a
	// typo like 10 instead of 1 should not make every run wait for WAIT to time out.
	maxMinReplicas = 100
)

// addMinReplicasFlag adds run's --min-replicas (only run takes locks).
func addMinReplicasFlag(f *pflag.FlagSet, o *backendOptions) {
	f.IntVar(&o.MinReplicas, "min-replicas", 0, "with Redis, replicas that must acknowledge the lock (WAIT) when it is taken and at each renewal; 0 = none (env "+minReplicasName+")")
}

// resolveHA checks --min-replicas and picks up the Sentinel password file.
func (o *backendOptions) resolveHA(fs *pflag.FlagSet, s *settings) error {
	if o.MinReplicas < 0 || o.MinReplicas > maxMinReplicas {
		return fmt.Errorf("--min-replicas %d (%s): use 0 to %d", o.MinReplicas, minReplicasName, maxMinReplicas)
	}
	if o.Backend != "redis" && fs.Changed("min-replicas") && o.MinReplicas > 0 {
		if o.Backend == "etcd" {
			return fmt.Errorf("--min-replicas needs the Redis backend: etcd acknowledges a write only once a quorum of its members has it, so every lock is already replicated; drop --min-replicas")
		}
		return fmt.Errorf("--min-replicas needs the Redis backend: a local lock has no replicas")
	}
	o.SentinelPasswordFile = s.vals[sentinelPasswordName]
	return nil
}

// haOptions fills the Sentinel password of ro from its file.
func (o *backendOptions) haOptions(ro *redis.Options) error {
	ro.MinReplicas = o.MinReplicas
	if o.SentinelPasswordFile == "" {
		return nil
	}
	pw, err := readPasswordFile(o.SentinelPasswordFile, "Sentinel", sentinelPasswordName)
	ro.SentinelPassword = pw
	return err
}
