package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runIn executes dexctl with args and stdin and returns its output and error.
func runIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// A message longer than a shell passes as an argument comes from a file or
// standard input, whole and as it is.
func TestMessagesFromAFileOrStandardInput(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	big := strings.Repeat("a long message line\n", 300<<10/20) // 300 KiB
	file := filepath.Join(t.TempDir(), "message.txt")
	if err := os.WriteFile(file, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"session", "start", "--message-file", file}},
		{big, []string{"session", "start", "--message", "-"}},
		{big, []string{"session", "start", "--message-file", "-"}},
	} {
		f.created = nil
		if out, err := runIn(t, c.stdin, append([]string{"--addr", addr}, c.args...)...); err != nil {
			t.Fatalf("dexctl %s: %v: %s", strings.Join(c.args, " "), err, out)
		}
		if len(f.created) != 1 || f.created[0].Message != big {
			t.Fatalf("dexctl %s: the cluster got %d sessions; want one whose first message is the %d bytes", strings.Join(c.args, " "), len(f.created), len(big))
		}
	}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", []string{"session", "send", "s1", "--message-file", file}},
		{big, []string{"session", "send", "s1", "-"}},
		{big, []string{"session", "send", "s1", "--message-file", "-"}},
	} {
		f.sent = nil
		if out, err := runIn(t, c.stdin, append([]string{"--addr", addr}, c.args...)...); err != nil {
			t.Fatalf("dexctl %s: %v: %s", strings.Join(c.args, " "), err, out)
		}
		if len(f.sent) != 1 || f.sent[0].Text != big || f.sent[0].SessionId != "s1" {
			t.Fatalf("dexctl %s: the cluster got %d messages; want the %d bytes once", strings.Join(c.args, " "), len(f.sent), len(big))
		}
	}
	// TEXT on the command line still works.
	f.sent = nil
	if _, err := run(t, "--addr", addr, "session", "send", "s1", "hello"); err != nil || len(f.sent) != 1 || f.sent[0].Text != "hello" {
		t.Fatalf("send TEXT: %v, sent %v", err, f.sent)
	}
}

func TestAMessageGivenWrongIsRefusedBeforeAnyCall(t *testing.T) {
	dir := t.TempDir()
	notText := filepath.Join(dir, "binary")
	if err := os.WriteFile(notText, []byte{0xff, 0xfe, 0x00, 0x80}, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.txt")
	dead := deadAddr(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"session", "send", "s1"}, 2, "no message: give TEXT, - (standard input) or --message-file FILE"},
		{[]string{"session", "send", "s1", "hi", "--message-file", notText}, 2, "not two of them"},
		{[]string{"session", "start", "--message", "hi", "--message-file", notText}, 2, "not two of them"},
		{[]string{"session", "send", "s1", "--message-file", notText}, 2, "the message in " + notText + " is not UTF-8 text"},
		{[]string{"session", "start", "--message-file", missing}, 1, "read the message: open " + missing},
	} {
		var out, errb bytes.Buffer
		code := execute(append([]string{"--addr", dead}, c.args...), &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("dexctl %s: exit %d, stderr %q; want exit %d with %q", strings.Join(c.args, " "), code, errb.String(), c.code, c.want)
		}
	}
}

func TestMessageFlagsAreInTheHelp(t *testing.T) {
	for _, args := range [][]string{{"session", "start", "--help"}, {"session", "send", "--help"}} {
		out, err := run(t, args...)
		if err != nil || !strings.Contains(out, "--message-file") || !strings.Contains(out, "standard input") {
			t.Errorf("dexctl %s: %v\n%s\nwant --message-file and standard input described", strings.Join(args, " "), err, out)
		}
	}
}
