package cmd

import (
	"errors"
	"strings"

	"github.com/spf13/pflag"
)

// etcdOptions are the settings that reach an etcd cluster. They exist in every build, so
// that a build without the etcd backend can say how to get one instead of not knowing
// the flags.
type etcdOptions struct {
	EtcdEndpoints    string // comma-separated http(s)://host:port
	EtcdUser         string
	EtcdPasswordFile string
	EtcdCAFile       string
	EtcdCertFile     string
	EtcdKeyFile      string
}

func (o *etcdOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.EtcdEndpoints, "etcd", "", "etcd endpoints, comma-separated http(s)://host:port (env CRONLOCK_ETCD_ENDPOINTS)")
	fs.StringVar(&o.EtcdUser, "etcd-user", "", "etcd user name (env CRONLOCK_ETCD_USER); the password comes from --etcd-password-file")
	fs.StringVar(&o.EtcdPasswordFile, "etcd-password-file", "", "read the etcd password from this file (env CRONLOCK_ETCD_PASSWORD_FILE)")
	fs.StringVar(&o.EtcdCAFile, "etcd-ca-file", "", "CA certificate(s) that sign the etcd servers' certificates (env CRONLOCK_ETCD_CA_FILE)")
	fs.StringVar(&o.EtcdCertFile, "etcd-cert-file", "", "client certificate for etcd (env CRONLOCK_ETCD_CERT_FILE)")
	fs.StringVar(&o.EtcdKeyFile, "etcd-key-file", "", "key of the etcd client certificate (env CRONLOCK_ETCD_KEY_FILE)")
	if !etcdBuilt {
		// Still accepted, so that one crontab line serves both builds and this one says
		// it has no etcd; only --help leaves out what this build cannot use.
		for _, n := range []string{"etcd", "etcd-user", "etcd-password-file", "etcd-ca-file", "etcd-cert-file", "etcd-key-file"} {
			fs.MarkHidden(n)
		}
	}
}

// endpoints splits --etcd into its URLs.
func (o *etcdOptions) endpoints() []string {
	var out []string
	for _, e := range strings.Split(o.EtcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// resolveEtcd settles the choices that involve etcd; done means the backend is chosen.
// Both a Redis URL and etcd endpoints make auto ambiguous: a VM must not lock on one
// while its neighbours lock on the other.
func (o *backendOptions) resolveEtcd() (done bool, err error) {
	switch {
	case o.Backend == "auto" && o.EtcdEndpoints != "" && o.RedisURL != "":
		return true, errors.New("both a Redis URL (--redis / CRONLOCK_REDIS_URL) and etcd endpoints (--etcd / CRONLOCK_ETCD_ENDPOINTS) are set, so auto cannot tell which one the fleet locks on; remove one, or choose with --backend / CRONLOCK_BACKEND")
	case o.Backend == "auto" && o.EtcdEndpoints != "":
		o.Backend = "etcd"
	case o.Backend == "etcd" && o.EtcdEndpoints == "":
		return true, errors.New("--etcd or CRONLOCK_ETCD_ENDPOINTS is required with --backend etcd")
	case o.Backend != "etcd":
		return false, nil
	}
	if !etcdBuilt {
		return true, errNoEtcd
	}
	return true, nil
}

// errNoEtcd is what a build without the etcd backend says when asked for it.
var errNoEtcd = errors.New("this cronlock was built without the etcd backend (the etcd client would slow down every run of the other backends); build one with go build -tags etcd (docs/etcd.md)")

// etcdSkew refuses --max-skew on etcd, which has no server clock to compare a host's
// with; a CRONLOCK_MAX_SKEW setting, shared by a whole machine, is ignored there.
func (o *runOptions) etcdSkew(f *pflag.FlagSet) error {
	if o.Backend != "etcd" {
		return nil
	}
	if f.Changed("max-skew") {
		return errors.New("--max-skew does not apply to --backend etcd: etcd has no clock to compare this host's with; keep the hosts' clocks in sync with NTP (docs/etcd.md) and drop --max-skew")
	}
	o.job.MaxSkew = 0
	return nil
}
