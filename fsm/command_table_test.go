package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// commandWith returns a command whose body is the oneof case fd, empty.
func commandWith(fd protoreflect.FieldDescriptor) (*fsmpb.Command, protoreflect.Message) {
	cmd := &fsmpb.Command{}
	m := cmd.ProtoReflect()
	body := m.NewField(fd)
	m.Set(fd, body)
	return cmd, body.Message()
}

// Every case of the body oneof is in the command table exactly once, and a
// command finds its own entry: a new command cannot be forgotten.
func TestCommandTable_RegistersEveryBodyOnce(t *testing.T) {
	fields := commandBody.Fields()
	if len(commandTable) != fields.Len() {
		t.Errorf("the command table has %d entries; fsmpb.Command's body has %d cases", len(commandTable), fields.Len())
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		var entries []*command
		for j := range commandTable {
			if commandTable[j].body == fd.Message().FullName() {
				entries = append(entries, &commandTable[j])
			}
		}
		if len(entries) != 1 {
			t.Errorf("body %s (%s) has %d entries in the command table; want 1", fd.Name(), fd.Message().FullName(), len(entries))
			continue
		}
		if cmd, _ := commandWith(fd); commandOf(cmd) != entries[0] {
			t.Errorf("a command with body %s does not find its entry", fd.Name())
		}
	}
	if commandOf(&fsmpb.Command{}) != nil || MayQueueSteps(&fsmpb.Command{}) {
		t.Error("a command without a body has an entry")
	}
}

// A command is fenced by the dispatch epoch exactly when its body carries
// one: a new leader-proposed command that carries an epoch cannot go
// unfenced.
func TestCommandTable_FencesEveryBodyThatCarriesAnEpoch(t *testing.T) {
	fields := commandBody.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		ep := fd.Message().Fields().ByName("epoch")
		carries := ep != nil && ep.Kind() == protoreflect.Uint64Kind
		cmd, _ := commandWith(fd)
		if c := commandOf(cmd); c != nil && c.fenced != carries {
			t.Errorf("body %s carries an epoch: %t; fenced: %t", fd.Name(), carries, c.fenced)
		}
	}
}

// fencedValid are bodies of the fenced commands that check their fields
// before the epoch, with fields that pass those checks.
var fencedValid = map[protoreflect.FullName]proto.Message{
	"dex.fsm.v1.SetEventRetention":    &fsmpb.SetEventRetention{Retention: &fsmpb.EventRetention{}},
	"dex.fsm.v1.PruneEvents":          &fsmpb.PruneEvents{MaxEvents: 1},
	"dex.fsm.v1.FoldTurns":            &fsmpb.FoldTurns{SessionIds: []string{"s1"}, MaxSteps: 1},
	"dex.fsm.v1.PurgeSession":         &fsmpb.PurgeSession{SessionId: "s1", MaxRows: 1},
	"dex.fsm.v1.ExpireSessions":       &fsmpb.ExpireSessions{SessionIds: []string{"s1"}, IdleBeforeMs: 1},
	"dex.fsm.v1.ExpireClosedSessions": &fsmpb.ExpireClosedSessions{SessionIds: []string{"s1"}},
	"dex.fsm.v1.ImportSessionBegin": &fsmpb.ImportSessionBegin{Session: &fsmpb.Session{
		Id: "imported", Status: fsmpb.SessionStatus_SESSION_STATUS_CLOSED, NextStep: 1, NextHistory: 1, NextInbox: 1,
	}},
	"dex.fsm.v1.ImportSessionPage": &fsmpb.ImportSessionPage{SessionId: "imported", Events: []*fsmpb.Event{{Seq: 1, SessionId: "imported", Ordinal: 1}}},
	"dex.fsm.v1.ImportSessionEnd":  &fsmpb.ImportSessionEnd{SessionId: "imported"},
	"dex.fsm.v1.ForkSessionBegin": &fsmpb.ForkSessionBegin{SourceId: "s1", AtSeq: 1, Session: &fsmpb.Session{
		Id: "fork", Status: fsmpb.SessionStatus_SESSION_STATUS_IDLE, NextStep: 1, NextTurn: 1, NextHistory: 2, NextInbox: 1,
		HistoryCount: 1, ForkedFrom: "s1", ForkedAtSeq: 1,
	}},
	"dex.fsm.v1.ForkSessionEnd":   &fsmpb.ForkSessionEnd{SessionId: "fork"},
	"dex.fsm.v1.BulkJobStep":      &fsmpb.BulkJobStep{JobId: "job", Last: true},
	"dex.fsm.v1.FireScheduleSlot": &fsmpb.FireScheduleSlot{ScheduleId: "daily", SlotMs: 1, RunSlotMs: 1, SessionId: "daily-1", NextSlotMs: 2},
}

// A fenced command from an older epoch, or a newer one, is refused as stale
// and changes nothing.
func TestCommandTable_FencedCommandsRefuseAStaleEpoch(t *testing.T) {
	d := newDriver(t)
	d.createSession("s1", "", "hello")
	d.newEpoch()
	fields := commandBody.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		cmd, body := commandWith(fd)
		if c := commandOf(cmd); c == nil || !c.fenced {
			continue
		}
		if v, ok := fencedValid[fd.Message().FullName()]; ok {
			proto.Merge(body.Interface(), v)
		}
		for _, epoch := range []uint64{d.epoch - 1, d.epoch + 1} {
			body.Set(body.Descriptor().Fields().ByName("epoch"), protoreflect.ValueOfUint64(epoch))
			if r := d.refused(proto.Clone(cmd).(*fsmpb.Command), CodeFailedPrecondition); !strings.Contains(r.Reason, "stale dispatch epoch") {
				t.Errorf("%s of epoch %d was refused with %q; want a stale epoch", fd.Name(), epoch, r.Reason)
			}
		}
	}
}

// The fenced commands that check their fields refuse a malformed body of a
// stale epoch as malformed, as they did before the fence was in the table.
func TestCommandTable_FieldChecksComeBeforeTheFence(t *testing.T) {
	d := newDriver(t)
	fields := commandBody.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if _, ok := fencedValid[fd.Message().FullName()]; !ok {
			continue
		}
		cmd, body := commandWith(fd)
		body.Set(body.Descriptor().Fields().ByName("epoch"), protoreflect.ValueOfUint64(d.epoch+1))
		d.refused(cmd, CodeInvalid)
	}
}
