//go:build !etcd

package cmd

import "cronlock/lockrun"

// etcdBuilt: this build has no etcd backend. The etcd client's package init would slow
// every start of the program (BENCHMARKS.md), which the Redis and local users would pay.
const etcdBuilt = false

func (o *backendOptions) openEtcd() (lockrun.Locker, error) { return nil, errNoEtcd }
