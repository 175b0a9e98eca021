package main

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func (f *fakeSessions) ResumeSession(_ context.Context, req *dexv1.ResumeSessionRequest) (*dexv1.ResumeSessionResponse, error) {
	if req.SessionId != "s1" {
		return nil, status.Errorf(codes.NotFound, "session %q not found", req.SessionId)
	}
	f.resumes = append(f.resumes, req)
	return &dexv1.ResumeSessionResponse{}, nil
}

// resume and label take cancel's filter flags: a filter starts a bulk job
// of the command's action and follows it.
func TestBulk_SessionResumeAndLabelWithAFilterStartAJob(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, resume := range [][]string{{"session", "resume"}, {"resume"}} {
		out, err := run(t, append(append([]string{"--addr", addr}, resume...), "--label", "team=a", "--status", "errored")...)
		if err != nil {
			t.Fatalf("%v: %v", resume, err)
		}
		req := f.bulkStarts[len(f.bulkStarts)-1]
		if req.Action != dexv1.BulkAction_BULK_ACTION_RESUME || req.Filter.Status != dexv1.SessionStatus_SESSION_STATUS_ERRORED ||
			len(req.Filter.Labels) != 1 || req.Filter.Labels[0].Key != "team" || req.Filter.Labels[0].Value != "a" {
			t.Fatalf("%v: request %v", resume, req)
		}
		for _, want := range []string{"bulk job " + req.JobId + " started: resume label team=a, status errored", "done: 200 acted on"} {
			if !strings.Contains(out, want) {
				t.Fatalf("%v: output %q lacks %q", resume, out, want)
			}
		}
		f.bulkGets = 0
	}
	out, err := run(t, "--addr", addr, "session", "label", "--filter", "agent=bot,status=idle", "owner=ana", "tier=1", "--no-wait")
	if err != nil {
		t.Fatal(err)
	}
	req := f.bulkStarts[len(f.bulkStarts)-1]
	if req.Action != dexv1.BulkAction_BULK_ACTION_LABEL || req.Filter.Agent != "bot" || req.Filter.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE ||
		len(req.Labels) != 2 || req.Labels[0].Key != "owner" || req.Labels[0].Value != "ana" || req.Labels[1].Key != "tier" || len(req.Filter.Labels) != 0 {
		t.Fatalf("label request: %v", req)
	}
	if !strings.Contains(out, "started: label agent bot, status idle") || f.bulkGets != 0 {
		t.Fatalf("label --no-wait: %q, %d reads", out, f.bulkGets)
	}
	if len(f.resumes) != 0 || len(f.labels) != 0 {
		t.Fatalf("a filtered command also acted on one session: resumes %v, labels %v", f.resumes, f.labels)
	}
}

// Without a filter, resume and label act on the one session they name.
func TestBulk_SessionResumeAndLabelOfOneSessionStillWork(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "resume", "s1", "--drop")
	if err != nil || out != "resumed (drop)\n" || len(f.resumes) != 1 || f.resumes[0].Choice != dexv1.ResumeChoice_RESUME_CHOICE_DROP {
		t.Fatalf("session resume s1 --drop: %q, %v, %v", out, err, f.resumes)
	}
	out, err = run(t, "--addr", addr, "resume", "s1")
	if err != nil || out != "resumed (retry)\n" || len(f.resumes) != 2 || f.resumes[1].Choice != dexv1.ResumeChoice_RESUME_CHOICE_RETRY {
		t.Fatalf("resume s1: %q, %v, %v", out, err, f.resumes)
	}
	if _, err := run(t, "--addr", addr, "resume", "nope"); err == nil || !strings.Contains(err.Error(), `session "nope" not found`) {
		t.Fatalf("resume of an unknown session: %v", err)
	}
	out, err = run(t, "--addr", addr, "session", "label", "s1", "team=b", "--remove", "env")
	if err != nil || out != "s1 labels: team=b\n" || len(f.labels) != 1 || f.labels[0].Remove[0] != "env" {
		t.Fatalf("session label s1: %q, %v, %v", out, err, f.labels)
	}
	if len(f.bulkStarts) != 0 {
		t.Fatalf("a command on one session started a job: %v", f.bulkStarts)
	}
}

func TestBulk_SessionResumeAndLabelBadInputIsRefusedBeforeAnyCall(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "resume", "s1", "--label", "team=a"}, "give a session ID or a filter, not both"},
		{[]string{"resume", "s1", "--status", "errored"}, "give a session ID or a filter, not both"},
		{[]string{"session", "resume", "--status", "errored", "--drop"}, "--drop takes a session ID"},
		{[]string{"session", "resume"}, "give a session ID, or a filter"},
		{[]string{"session", "resume", "--filter", "colour=red"}, "is not one of label"},
		{[]string{"session", "resume", "--status", "sleepy"}, `--status "sleepy"`},
		{[]string{"session", "label", "s1", "owner=ana", "--label", "team=a"}, `give a session ID or a filter, not both: with a filter the arguments are the KEY=VALUE labels to set ("s1" is not one)`},
		{[]string{"session", "label", "--label", "team=a"}, "a label job needs KEY=VALUE labels to set"},
		{[]string{"session", "label", "--agent", "bot", "owner=ana", "--remove", "env"}, "--remove takes a session ID"},
		{[]string{"session", "label", "--agent", "bot", "=ana"}, `label "=ana": write KEY=VALUE`},
		{[]string{"session", "label", "--filter", "agent", "owner=ana"}, "each part is KEY=VALUE"},
		{[]string{"session", "label"}, "give a session ID, or a filter"},
	} {
		if _, err := run(t, append([]string{"--addr", addr}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
	}
	if len(f.bulkStarts) != 0 || len(f.resumes) != 0 || len(f.labels) != 0 {
		t.Fatalf("refused input acted: jobs %v, resumes %v, labels %v", f.bulkStarts, f.resumes, f.labels)
	}
}

// The help of resume and label shows the filter form and its flags.
func TestBulk_SessionResumeAndLabelHelpShowTheFilter(t *testing.T) {
	for _, cmd := range [][]string{{"session", "resume"}, {"resume"}, {"session", "label"}} {
		out, err := run(t, append(cmd, "--help")...)
		for _, want := range []string{"--filter ...", "--filter string", "--label stringArray", "--agent string", "--status string", "--no-wait"} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("%v --help: %v; lacks %q in:\n%s", cmd, err, want, out)
			}
		}
	}
}
