//go:build etcd

package cmd

import (
	"cronlock/lockrun"
	"cronlock/lockrun/etcd"
)

// etcdBuilt: this build has the etcd backend (the etcd build tag).
const etcdBuilt = true

// openEtcd prepares the etcd backend; it does not connect yet.
func (o *backendOptions) openEtcd() (lockrun.Locker, error) {
	eo := etcd.Options{Endpoints: o.endpoints(), User: o.EtcdUser, CAFile: o.EtcdCAFile,
		CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile, Timeout: o.RedisTimeout, Prefix: o.Prefix, FleetKeep: o.FleetKeep,
		PrevTick: prevTickOf}
	if o.EtcdPasswordFile != "" {
		pw, err := readPasswordFile(o.EtcdPasswordFile, "etcd", "--etcd-password-file / CRONLOCK_ETCD_PASSWORD_FILE")
		if err != nil {
			return nil, err
		}
		eo.Password = pw
	}
	return etcd.New(eo)
}
