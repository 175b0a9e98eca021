package store

import "testing"

func TestDueIndexArguments(t *testing.T) {
	x := dueIndexer{due: timerDue}
	if _, err := x.FromArgs(); err == nil {
		t.Fatal("no argument accepted")
	}
	if _, err := x.FromArgs("soon"); err == nil {
		t.Fatal("a string accepted as a due time")
	}
	a, _ := x.FromArgs(int64(-5))
	b, _ := x.FromArgs(int64(7))
	if string(a) >= string(b) {
		t.Fatal("a negative due time sorts after a positive one")
	}
}
