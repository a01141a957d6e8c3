package tty

import (
	"os"
	"path/filepath"
	"testing"

	"cronlock/internal/proctest"
)

// InForeground's true answer needs a controlling terminal: lockrun's foreground tests
// cover it through one.
func TestNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, f := range map[string]*os.File{"regular file": f, "pipe": w, "nil": nil} {
		if IsTerminal(f) {
			t.Errorf("%s: IsTerminal = true", name)
		}
		if InForeground(f) {
			t.Errorf("%s: InForeground = true", name)
		}
	}
}

func TestPseudoTerminal(t *testing.T) {
	m, pts := proctest.OpenPTY(t)
	for name, f := range map[string]*os.File{"master": m, "terminal side": pts} {
		if !IsTerminal(f) {
			t.Errorf("the %s of a pseudo-terminal is not seen as a terminal", name)
		}
		// Not this process's controlling terminal: it has no foreground group of ours.
		if InForeground(f) {
			t.Errorf("the %s of a terminal that is not cronlock's: InForeground is true", name)
		}
	}
}
