//go:build etcd

package cmd

// etcdBuildTag makes the binary under test an etcd build when the tests are one.
const etcdBuildTag = ",etcd"
