// Package userdb finds users in the password database as the machine's own tools do,
// also in cronlock's static release build. That build uses Go's own lookup (the osusergo
// tag), which reads /etc/passwd only: glibc's NSS modules (LDAP, SSSD, NIS) cannot be
// loaded into a static binary. When that lookup finds nothing, userdb asks the system's
// `getent passwd` (run directly, no shell), which goes through NSS, so a user from LDAP
// still gets their home folder and thus their history file.
//
// It never reads $HOME or $USER: cron and a login shell must agree on the answer.
package userdb

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// getent is the program asked when the built-in lookup finds nothing; found on PATH
// (a variable so that tests can name another).
var getent = "getent"

// getentTimeout bounds one getent call: an unreachable LDAP server must not hang a run
// for NSS's own (often minutes long) time-outs.
const getentTimeout = 10 * time.Second

// LookupID returns the user with numeric id uid: os/user first, then `getent passwd
// UID`. When neither finds it, the error is os/user's (user.UnknownUserIdError when the
// user is unknown), with what getent said added when getent itself failed.
func LookupID(uid int) (*user.User, error) {
	id := strconv.Itoa(uid)
	u, err := user.LookupId(id)
	if err == nil {
		return u, nil
	}
	return fallback(id, err, func(g *user.User) bool { return g.Uid == id })
}

// Lookup returns the user named name: os/user first, then `getent passwd NAME`.
func Lookup(name string) (*user.User, error) {
	u, err := user.Lookup(name)
	if err == nil {
		return u, nil
	}
	if name == "" || strings.ContainsAny(name, ":\n") || strings.HasPrefix(name, "-") {
		return nil, err
	}
	return fallback(name, err, func(g *user.User) bool { return g.Username == name })
}

// fallback asks getent for key after os/user failed with first; match checks that the
// entry getent printed is the one asked for.
func fallback(key string, first error, match func(*user.User) bool) (*user.User, error) {
	path, lerr := exec.LookPath(getent)
	if lerr != nil {
		return nil, first // no getent (a container without libc): os/user's answer stands
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, path, "passwd", key)
	c.Env = []string{} // getent needs none, and the caller's may hold secrets
	out, err := c.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return nil, first // getent's "not found"
	}
	if err != nil {
		return nil, fmt.Errorf("%w (getent passwd %s: %v)", first, key, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	u, perr := parse(line)
	if perr != nil || !match(u) {
		return nil, fmt.Errorf("%w (getent passwd %s printed an entry that is not the one asked for)", first, key)
	}
	return u, nil
}

// parse reads one passwd(5) line: name:password:uid:gid:gecos:home:shell.
func parse(line string) (*user.User, error) {
	f := strings.Split(strings.TrimRight(line, "\r"), ":")
	if len(f) != 7 || f[0] == "" {
		return nil, errors.New("not a passwd entry")
	}
	for _, n := range f[2:4] {
		if _, err := strconv.ParseUint(n, 10, 32); err != nil {
			return nil, errors.New("not a passwd entry")
		}
	}
	name, _, _ := strings.Cut(f[4], ",") // the GECOS field's first part is the full name
	return &user.User{Username: f[0], Uid: f[2], Gid: f[3], Name: name, HomeDir: f[5]}, nil
}
