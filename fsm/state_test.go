package fsm

import (
	"bytes"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
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

// A batch with a rejected command in its middle leaves the state of applying
// its entries one by one, and gives each entry its own result.
func TestApplyBatch_ARejectedEntryChangesNothingButTheAppliedIndex(t *testing.T) {
	one, batch := newDriver(t), newDriver(t)
	cmds := []*fsmpb.Command{
		{NowMs: one.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", MessageId: "m1", Message: "hi"}}},
		{NowMs: one.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s", MessageId: "m2", Message: "again"}}},
		{NowMs: one.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s", MessageId: "m3", Text: "more"}}},
		{NowMs: one.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "nope", MessageId: "m4", Text: "lost"}}},
		{NowMs: one.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s", MessageId: "m3", Text: "more"}}},
	}
	var entries []Entry
	var want []*Result
	for _, c := range cmds {
		data := mustEncode(t, c)
		one.index++
		want = append(want, one.f.ApplyEntry(one.index, data))
		entries = append(entries, Entry{Index: one.index, Data: data})
	}
	got := batch.f.ApplyBatch(entries)
	for i := range got {
		if (got[i].Err == nil) != (want[i].Err == nil) || got[i].Replayed != want[i].Replayed || got[i].Index != want[i].Index {
			t.Fatalf("entry %d: one by one %+v, in the batch %+v", i, want[i], got[i])
		}
	}
	if got[1].Err == nil || got[3].Err == nil || !got[4].Replayed {
		t.Fatalf("want entries 2 and 4 rejected and 5 a replay: %+v", got)
	}
	if !bytes.Equal(persist(t, one.f), persist(t, batch.f)) {
		t.Fatal("the batch left another state than the entries one by one")
	}
	if batch.f.State().Meta().AppliedIndex != entries[len(entries)-1].Index {
		t.Fatal("the applied index is not the batch's last entry")
	}
}
