//go:build e2e

package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A watch from a position the event retention dropped resumes from the first
// kept event and says which were lost, in the library and in dexctl.
func TestRetention_AWatchFromADroppedPositionResumesFromTheFirstKept(t *testing.T) {
	const keep = 4
	e := newEnv(t, "--event-retention-count", fmt.Sprint(keep))
	// No Worker: the turn stays queued and every message lands in the inbox,
	// one event each.
	id := e.createSession("first")
	for i := range 2 * keep {
		if _, err := e.client.SendMessage(e.ctx(20*time.Second), id, "more", fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	var gaps []client.EventsNotKeptError
	var got []*dexv1.Event
	enough := errors.New("enough")
	err := e.client.WatchSession(e.ctx(30*time.Second), id, 0, func(ev *dexv1.Event) error {
		got = append(got, ev)
		if len(got) == keep {
			return enough
		}
		return nil
	}, client.OnEventsNotKept(func(g client.EventsNotKeptError) error {
		gaps = append(gaps, g)
		return nil
	}))
	if !errors.Is(err, enough) {
		t.Fatalf("watch ended after %d events: %v", len(got), err)
	}
	if len(gaps) != 1 || gaps[0].After != 0 || gaps[0].FirstKept == 0 || gaps[0].ResumeAfter >= gaps[0].FirstKept {
		t.Fatalf("reported gaps %+v; want one from 0 naming the first kept event", gaps)
	}
	if got[0].Seq != gaps[0].FirstKept {
		t.Fatalf("first delivered event %d; want the first kept %d", got[0].Seq, gaps[0].FirstKept)
	}
	for _, ev := range got {
		if ev.Type != "message_received" {
			t.Fatalf("kept event %d is %s; want the newest (message_received) events", ev.Seq, ev.Type)
		}
	}

	// dexctl says so too, then prints the kept events.
	cmd := exec.Command(filepath.Join(binDir, "dexctl"), "--addr", strings.Join(e.cluster.GRPCAddrs(), ","), "session", "watch", id, "--json")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	var first struct {
		NotKept *struct {
			After     uint64 `json:"after_seq"`
			Through   uint64 `json:"through_seq"`
			FirstKept uint64 `json:"first_kept_seq"`
		} `json:"events_not_kept"`
	}
	if !lines.Scan() {
		t.Fatalf("dexctl printed nothing: %v", lines.Err())
	}
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil || first.NotKept == nil || first.NotKept.FirstKept != gaps[0].FirstKept {
		t.Fatalf("dexctl's first line %q: want the events no longer kept, first kept %d", lines.Text(), gaps[0].FirstKept)
	}
	for i := range keep {
		if !lines.Scan() {
			t.Fatalf("dexctl stopped after %d events: %v", i, lines.Err())
		}
		var ev struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil || ev.Seq != got[i].Seq {
			t.Fatalf("dexctl event line %q; want seq %d", lines.Text(), got[i].Seq)
		}
	}
}
