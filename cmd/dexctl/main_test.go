package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

// run executes dexctl with args and returns its output and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestBadInputIsAClearErrorBeforeAnyCall(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "s1-s3", "--outcome", "maybe"}, `--outcome must be succeeded or failed, not "maybe"`},
		{[]string{"reconcile", "s1-s3"}, `--outcome must be succeeded or failed, not ""`},
		{[]string{"session", "send", "only-an-id"}, "no message: give TEXT"},
		{[]string{"--addr", "", "status"}, "--addr is empty"},
		{[]string{"session", "edit", "s1"}, "nothing to edit: give --truncate-from SEQ, --note TEXT, or both"},
	}
	for _, c := range cases {
		_, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dexctl %s: %v; want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestNoNodeAnsweringSaysWhichWereTried(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	addrs := a + "," + b
	for _, args := range [][]string{
		{"--addr", addrs, "status"},
		{"--addr", addrs, "--wait", "0s", "session", "show", "s1"},
		{"--addr", addrs, "node", "remove", "n3"},
	} {
		_, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), "no Dex") || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Errorf("dexctl %s: %v; want it to say no node answered, naming %s and %s", strings.Join(args, " "), err, a, b)
		}
	}
}
