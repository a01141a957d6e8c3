package tty

import (
	"os"
	"path/filepath"
	"testing"
)

// A terminal is needed to see true answers; /dev/ptmx gives one without a controlling
// terminal, which is enough for IsTerminal. InForeground is covered through a real
// terminal by lockrun's foreground tests.
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
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer m.Close()
	if !IsTerminal(m) {
		t.Fatal("the master side of a pseudo-terminal is not seen as a terminal")
	}
	// Not this process's controlling terminal: it has no foreground group of ours.
	if InForeground(m) {
		t.Fatal("InForeground is true for a terminal that is not cronlock's")
	}
}
