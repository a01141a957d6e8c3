//go:build etcd

package cmd

import (
	"context"
	"testing"
	"time"

	"cronlock/internal/etcdtest"
)

// The checkpoint tests run on etcd too in the etcd build.
func init() {
	ckptBackends = append(ckptBackends, "etcd")
	ckptEtcd = func(t *testing.T) (*cli, func(name string)) {
		srv := etcdtest.Start(t, etcdtest.Options{})
		return newEtcdCLI(t, srv), func(name string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := srv.Root().Delete(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}
