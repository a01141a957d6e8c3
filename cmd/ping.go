package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"cronlock/notify"
)

// resolvePing checks --ping (or CRONLOCK_PING_URL) and fills in its {key}, as a
// Healthchecks slug (notify.Slug): wrap's keys ("gc.sh-9cda6ff8") must name a check that
// Healthchecks can find or create. The URL is a secret: no message quotes it. Set for a
// whole machine or crontab, it must hold {key}, or every job would ping one check and a
// failing job would hide behind the others' successes; on the command line it belongs to
// one job already.
func (o *runOptions) resolvePing(f *pflag.FlagSet, s *settings) error {
	raw := o.Ping
	if raw == "" {
		return nil // --ping '' turns a machine-wide setting off for this job
	}
	what, where := s.origin(f, "ping", "CRONLOCK_PING_URL")
	if !f.Changed("ping") && !strings.Contains(raw, "{key}") {
		return fmt.Errorf("%s%s has no {key}: one URL for every job would fold them all into one check; write {key} where the check's name goes (e.g. https://hc-ping.com/PING_KEY/{key}), or give --ping to the one job", what, where)
	}
	u := strings.ReplaceAll(raw, "{key}", notify.Slug(o.job.Key))
	if err := notify.Check(u); err != nil {
		return fmt.Errorf("%s%s: %v", what, where, err)
	}
	o.job.Ping = u
	return nil
}
