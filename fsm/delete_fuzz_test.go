package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// FuzzDelete drives FuzzApply's random sequences with deletes, purges and
// expiries among them, and checks after every command: FuzzApply's
// invariants; a deleted session has no Step queued, running or waiting (only
// a session at rest is deleted, so nothing of it is dispatched later); a
// purged session left no row in any table; a rejected command changes
// nothing; two state machines fed the same log stay byte-identical.
func FuzzDelete(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 2, 3, 4, 19, 20, 20, 20, 20, 1, 0, 2},
		{0, 0, 2, 3, 4, 19, 2, 3, 6, 2, 3, 6, 2, 3, 6, 19, 21, 21, 21},
		{0, 2, 3, 4, 22, 20, 20, 20, 2, 3, 19, 11},
		{0, 1, 2, 3, 4, 2, 19, 3, 4, 19, 20, 20, 20, 20, 20, 20},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		d := newDriver(t)
		d.twin = New(Options{})
		var buf bytes.Buffer
		if err := d.f.Snapshot().Persist(&buf); err != nil {
			t.Fatal(err)
		}
		if err := d.twin.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		fz := &fuzzer{d: d, outcomes: map[string]fsmpb.Outcome{}}
		everDeleted := map[string]bool{}
		for i, op := range ops {
			salt := byte(i)
			id := ""
			if fz.sessions > 0 {
				id = fmt.Sprintf("s%d", int(salt)%fz.sessions+1)
			}
			switch k := op % 23; {
			case k < 19:
				fz.step(k, salt)
			case k == 19 && id != "":
				fz.apply(deleteCmd(id))
			case k == 20 || k == 21:
				for _, del := range d.f.State().DeletedSessions(2) {
					fz.apply(d.purgeCmd(del, uint32(salt%5)+1))
				}
			case k == 22 && id != "":
				fz.apply(&fsmpb.Command{Body: &fsmpb.Command_ExpireSessions{ExpireSessions: &fsmpb.ExpireSessions{
					Epoch: d.epoch, IdleBeforeMs: d.now + int64(salt%2), SessionIds: []string{id},
				}}})
			}
			fz.check()
			st := d.f.State()
			for _, del := range st.DeletedSessions(1 << 20) {
				everDeleted[del] = true
				for _, raw := range firstRows(st.tx, sessionTables[0], del, 1<<20) {
					if s := raw.(*fsmpb.Step); s.Status != fsmpb.StepStatus_STEP_STATUS_DONE {
						t.Fatalf("deleted session %s has Step %s %s", del, s.Id, s.Status)
					}
				}
			}
			for del := range everDeleted {
				if !st.IsDeleted(del) && st.Session(del) == nil {
					if rows := rowsOf(d.f, del); total(rows) != 0 {
						t.Fatalf("purged session %s left rows %v", del, rows)
					}
				}
			}
		}
		if len(d.halts) > 0 {
			t.Fatalf("the state machine halted: %v", d.halts)
		}
		if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
			t.Fatal("two state machines fed the same log persist different bytes")
		}
	})
}
