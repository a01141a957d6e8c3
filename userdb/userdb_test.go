package userdb

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeGetent puts a getent on PATH that prints out for "passwd KEY" and exits with code;
// it records its arguments so a test can see it was asked.
func fakeGetent(t *testing.T, key, out string, code int) string {
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\nif [ \"$1 $2\" = 'passwd " + key + "' ]; then printf '%s\\n' '" + out + "'; exit " + strconv.Itoa(code) + "; fi\nexit 2\n"
	if err := os.WriteFile(filepath.Join(dir, "getent"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	return argsFile
}

// An id and a name that /etc/passwd does not hold, as an LDAP user's are.
const ldapUID, ldapName = 3999123, "ldap-only-user"

// TestGetentFallback: a user the built-in lookup does not find is taken from getent's
// answer (as NSS would give it: LDAP, SSSD), by id and by name.
func TestGetentFallback(t *testing.T) {
	if _, err := user.LookupId(strconv.Itoa(ldapUID)); err == nil {
		t.Skipf("uid %d exists here", ldapUID)
	}
	line := ldapName + ":*:3999123:100:LDAP User,,,:/home/ldap/" + ldapName + ":/bin/bash"
	fakeGetent(t, strconv.Itoa(ldapUID), line, 0)
	u, err := LookupID(ldapUID)
	if err != nil || u.HomeDir != "/home/ldap/"+ldapName || u.Username != ldapName || u.Name != "LDAP User" || u.Gid != "100" {
		t.Fatalf("LookupID(%d) = %+v, %v; want the getent entry", ldapUID, u, err)
	}
	fakeGetent(t, ldapName, line, 0)
	if u, err := Lookup(ldapName); err != nil || u.Uid != "3999123" {
		t.Fatalf("Lookup(%s) = %+v, %v; want the getent entry", ldapName, u, err)
	}
}

// TestGetentRefusals: getent's "not found", a missing getent, an entry for another user
// and a malformed line all leave os/user's error; a user in /etc/passwd never runs getent.
func TestGetentRefusals(t *testing.T) {
	id := strconv.Itoa(ldapUID)
	for _, c := range []struct {
		name, line string
		code       int
	}{
		{"not found", "", 2},
		{"another user's entry", "root:x:0:0:root:/root:/bin/sh", 0},
		{"a malformed line", "x:y", 0},
		{"a uid that is not a number", "u:x:abc:0::/home/u:/bin/sh", 0},
	} {
		fakeGetent(t, id, c.line, c.code)
		u, err := LookupID(ldapUID)
		var unknown user.UnknownUserIdError
		if err == nil || !errors.As(err, &unknown) {
			t.Errorf("%s: LookupID = %+v, %v; want os/user's UnknownUserIdError", c.name, u, err)
		}
	}
	t.Setenv("PATH", t.TempDir()) // no getent at all
	if _, err := LookupID(ldapUID); err == nil {
		t.Errorf("no getent: LookupID(%d) found a user", ldapUID)
	}
	args := fakeGetent(t, "0", "", 2)
	if u, err := LookupID(0); err != nil || u.Username != "root" {
		t.Fatalf("LookupID(0) = %+v, %v; want root from /etc/passwd", u, err)
	}
	if _, err := os.Stat(args); err == nil {
		t.Errorf("root is in /etc/passwd, yet getent was run")
	}
	if _, err := Lookup("-x"); err == nil {
		t.Errorf("Lookup(-x) found a user; an option-like name must never reach getent")
	}
}
