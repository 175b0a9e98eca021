package fsm

import (
	"bytes"
	"testing"
	"time"
)

func TestState_ReadsNeverWaitForApply(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	d.f.mu.Lock() // an Apply or a Restore in progress
	defer d.f.mu.Unlock()
	read := make(chan bool)
	go func() { read <- d.f.State().Session("s") != nil }()
	select {
	case ok := <-read:
		if !ok {
			t.Fatal("the read did not see the session")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waited for the apply lock")
	}
}

func TestState_RestoreWakesTheReadersOfTheOldState(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	old := d.f.State()
	ws := old.WatchSet()
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Abandoned():
		t.Fatal("abandoned before any restore")
	default:
	}
	if err := d.f.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.Abandoned():
	default:
		t.Fatal("a restore did not close the old state's abandon channel")
	}
	if ws.Watch(time.After(10 * time.Second)) {
		t.Fatal("a watch set of the old state did not fire on restore")
	}
	if d.f.State().Session("s") == nil {
		t.Fatal("the restored state lost the session")
	}
}
