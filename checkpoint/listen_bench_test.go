package checkpoint

import "testing"

// BenchmarkListenClose: what the socket costs a run that never uses it.
func BenchmarkListenClose(b *testing.B) {
	for b.Loop() {
		s, err := Listen(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
