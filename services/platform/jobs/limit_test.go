package jobs

import (
	"errors"
	"testing"

	"github.com/riverqueue/river/rivertype"
)

func TestKeyLimit(t *testing.T) {
	l := &KeyLimit{Max: 2}
	r1, err := l.Acquire("slow")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := l.Acquire("slow")
	if err != nil {
		t.Fatal(err)
	}
	var snooze *rivertype.JobSnoozeError
	if _, err := l.Acquire("slow"); !errors.As(err, &snooze) {
		t.Fatalf("third job of a key = %v, want a snooze", err)
	}
	other, err := l.Acquire("fast")
	if err != nil {
		t.Fatalf("another key is held back: %v", err)
	}
	other()
	r1()
	r1() // a second release of the same slot frees nothing more
	r3, err := l.Acquire("slow")
	if err != nil {
		t.Fatalf("a released slot is not free: %v", err)
	}
	if _, err := l.Acquire("slow"); !errors.As(err, &snooze) {
		t.Fatalf("a double release freed a second slot: %v", err)
	}
	r2()
	r3()
	if len(l.busy) != 0 {
		t.Fatalf("keys left behind: %v", l.busy)
	}
}
