package fsm

import (
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func TestIDsTheClusterMakesAreValid(t *testing.T) {
	for _, id := range []string{"ses-3f2a9c01b7e4d5a6", "ses-3f2a9c01b7e4d5a6-s12", "parent@17", "n1", "a.b_c:d@e-f"} {
		if r := CheckID("id", id); r != nil {
			t.Errorf("CheckID(%q): %v", id, r)
		}
	}
	for _, key := range []string{"key-0123abcd", "ses-1/first", "child@42", "order 12 / retry"} {
		if r := CheckKey("key", key); r != nil {
			t.Errorf("CheckKey(%q): %v", key, r)
		}
	}
}

func TestBadSessionIDsAndMessageIDsAreRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "")
	for _, id := range []string{"a/../../b", "..", ".", "a/b", "esc\x1b[2J", "nul\x00", "tab\t", "rtl\u202etxt", "space d", "ünï"} {
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id}}}, CodeInvalid)
	}
	for _, key := range []string{"esc\x1b", "nul\x00", "line\nbreak", "rtl\u202e", "zw\u200b"} {
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s", MessageId: key, Text: "hi"}}}, CodeInvalid)
		d.refused(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "t", MessageId: key, Message: "hi"}}}, CodeInvalid)
	}
}
