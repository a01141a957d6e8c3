package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Exists reports whether there is anything to read at path: the history file, or the
// folder of per-run files beside it (the first run on a machine claims its file before
// its recorder has created the database). A command that finds nothing says so rather
// than create an empty history by opening one.
func Exists(path string) bool {
	_, err := os.Stat(path)
	_, rerr := os.Stat(path + "-runs")
	return !errors.Is(err, fs.ErrNotExist) || !errors.Is(rerr, fs.ErrNotExist)
}

// OpenReaped opens the history file for a command that shows it, with open (OpenRead for
// those that only read, Open for those that delete), marks this machine's dead runs
// abandoned (Reap, whatever node name they used: thisNode is only one of the ways Reap
// knows them; "" reaps nothing), and adds the rows of live runs that have none yet
// (AddLive). A failure of either is only handed to warn, as a whole line: what the
// command shows is still worth showing, with dead runs seen as running, or young ones
// missing. On a file it may only read, Reap writes nothing and young runs without a row
// are not shown. Its error is open's.
func OpenReaped(path, thisNode string, open func(string) (*Store, error), warn func(string)) (*Store, error) {
	s, err := open(path)
	if err != nil {
		return nil, err
	}
	if thisNode != "" {
		if _, err := s.Reap(thisNode); err != nil {
			warn(fmt.Sprintf("warning: could not look for abandoned runs: %v", err))
		}
	}
	if s.ReadOnly() {
		return s, nil
	}
	// Runs younger than a second have no row of their own yet (jobrun's startRowDelay).
	if _, err := s.AddLive(); err != nil {
		warn(fmt.Sprintf("warning: could not list the runs in progress: %v", err))
	}
	return s, nil
}
