package procfs

import (
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseFlocks(t *testing.T) {
	in := []byte(`1: FLOCK  ADVISORY  WRITE 18340 fe:00:9978410 0 EOF
2: -> FLOCK  ADVISORY  WRITE 18351 fe:00:9978410 0 EOF
3: FLOCK  ADVISORY  READ 18360 fe:00:9978411 0 EOF
4: POSIX  ADVISORY  WRITE 20960 fe:00:9978722 128 128
5: OFDLCK ADVISORY  WRITE -1 fe:00:9980659 0 EOF
6: FLOCK  ADVISORY  WRITE 18370 00:1a:12 0 EOF
7: FLOCK  ADVISORY  WRITE 18380 fe:00:notanumber 0 EOF
8: FLOCK  ADVISORY  WRITE x fe:00:5 0 EOF
9: FLOCK
10: FLOCK  ADVISORY  WRITE 18390 fe:00:77 0 EOF`)
	want := []Flock{{PID: 18340, Ino: 9978410}, {PID: 18390, Ino: 77}}
	if got := ParseFlocks(in, unix.Mkdev(0xfe, 0)); !reflect.DeepEqual(got, want) {
		t.Errorf("on fe:00: %+v, want %+v", got, want)
	}
	if got := ParseFlocks(in, unix.Mkdev(0, 0x1a)); !reflect.DeepEqual(got, []Flock{{PID: 18370, Ino: 12}}) {
		t.Errorf("on 00:1a: %+v", got)
	}
}
