//go:build etcd

package cmd

import (
	"fmt"
	"os"
	"strings"

	"cronlock/lockrun"
	"cronlock/lockrun/etcd"
)

// etcdBuilt: this build has the etcd backend (the etcd build tag).
const etcdBuilt = true

// openEtcd prepares the etcd backend; it does not connect yet.
func (o *backendOptions) openEtcd() (lockrun.Locker, error) {
	eo := etcd.Options{Endpoints: o.endpoints(), User: o.EtcdUser, CAFile: o.EtcdCAFile,
		CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile, Timeout: o.RedisTimeout, Prefix: o.Prefix, FleetKeep: o.FleetKeep}
	if o.EtcdPasswordFile != "" {
		b, err := os.ReadFile(o.EtcdPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("read the etcd password file (--etcd-password-file / CRONLOCK_ETCD_PASSWORD_FILE): %v", err)
		}
		// The first line only: an editor's or echo's newline is not part of it.
		line, _, _ := strings.Cut(string(b), "\n")
		if eo.Password = strings.TrimRight(line, "\r"); eo.Password == "" {
			return nil, fmt.Errorf("the etcd password file %s is empty", o.EtcdPasswordFile)
		}
	}
	return etcd.New(eo)
}
