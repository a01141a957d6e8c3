//go:build etcd

package cmd

import (
	"strings"
	"testing"
)

// On etcd too, the entry the release completes has the first 96 bytes of the run's last
// checkpoint.
func TestEtcdFleetEntryHasCheckpointStart(t *testing.T) {
	c, _ := ckptEtcd(t)
	c.env = append(c.env, "CL="+cronlockBin)
	long := strings.Repeat("0123456789abcdef", 10)
	cmd := c.command("run", "-k", "fk", "--", "sh", "-c", `"$CL" checkpoint save "$LONG"`)
	cmd.Env = append(cmd.Env, "LONG="+long)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v, %s", err, out)
	}
	code, out, errs := c.run("history", "--fleet", "--json", "--key", "fk")
	if code != 0 || !strings.Contains(out, `"checkpoint":"`+long[:96]+`","checkpoint_encoding":"utf-8"`) {
		t.Fatalf("history --fleet --json: exit %d, %s%s; want the checkpoint's first 96 bytes", code, out, errs)
	}
}
