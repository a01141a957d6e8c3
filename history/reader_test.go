package history

import (
	"os"
	"path/filepath"
	"testing"

	"cronlock/runstatus"
)

// TestExists: nothing at the path is no history; the folder of per-run files alone (a
// first run that has not created the database yet) is one, and so is the file.
func TestExists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	if Exists(path) {
		t.Fatal("an empty folder holds a history")
	}
	if err := os.Mkdir(path+"-runs", 0o700); err != nil {
		t.Fatal(err)
	}
	if !Exists(path) {
		t.Fatal("the per-run folder alone is not seen")
	}
	if _, path := openTemp(t); !Exists(path) {
		t.Fatal("a history file is not seen")
	}
}

// TestOpenReaped: a run whose cronlock died is abandoned once the file is opened for
// showing, with nothing to warn about; a file that cannot be opened gives open's error.
func TestOpenReaped(t *testing.T) {
	s, path := openTemp(t)
	dead, kill, _ := startHolder(t, path, "n1")
	kill()
	s.Close()
	warn := func(msg string) { t.Errorf("warned: %s", msg) }
	r, err := OpenReaped(path, "n1", Open, warn)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if run, err := r.Get(dead); err != nil || run.Status != runstatus.Abandoned {
		t.Fatalf("dead run: %v, %v; want %s", run.Status, err, runstatus.Abandoned)
	}
	if _, err := OpenReaped(filepath.Join(path, "not-a-folder.db"), "n1", Open, warn); err == nil {
		t.Fatal("a history under a file opened")
	}
}
