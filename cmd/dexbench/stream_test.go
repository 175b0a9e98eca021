package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

var streamT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func streamAt(msFromT0 float64) time.Time {
	return streamT0.Add(time.Duration(msFromT0 * float64(time.Millisecond)))
}

// streamThree notes three deltas of k, "aa" at 0 ms, "bbb" at 50 and "c" at
// 100, and returns their texts' concatenation.
func streamThree(c *deltaClock, k attemptKey) string {
	c.streamed(k, 0, 2, streamAt(0))
	c.streamed(k, 2, 3, streamAt(50))
	c.streamed(k, 5, 1, streamAt(100))
	return "aabbbc"
}

func TestDeltaClock_EachDeltaOnItsOwn_TimesEach(t *testing.T) {
	c := newDeltaClock()
	k := attemptKey{"stream-000000", "stream-000000-s1", 1}
	streamThree(c, k)
	for _, r := range []struct {
		off  uint64
		text string
		ms   float64
	}{{0, "aa", 1.5}, {2, "bbb", 52}, {5, "c", 103.25}} {
		if n := c.received(k, r.off, r.text, streamAt(r.ms)); n != 1 {
			t.Fatalf("received %q completed %d deltas; want 1", r.text, n)
		}
	}
	got := c.between(streamAt(0), streamAt(100))
	want := []float64{1.5, 2, 3.25}
	if len(got) != len(want) {
		t.Fatalf("latencies %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("latency %d: %v ms; want %v", i, got[i], want[i])
		}
	}
	if p := c.pending(); p != 0 {
		t.Errorf("%d deltas pending; want 0", p)
	}
}

func TestDeltaClock_CoalescedAndSplitPieces_CountADeltaWhenItsLastByteArrives(t *testing.T) {
	c := newDeltaClock()
	k := attemptKey{"stream-000000", "stream-000000-s1", 1}
	streamThree(c, k)
	// "aab": the first delta whole and a piece of the second.
	if n := c.received(k, 0, "aab", streamAt(10)); n != 1 {
		t.Fatalf("first piece completed %d deltas; want 1", n)
	}
	// "bbc": the rest of the second and the third, coalesced.
	if n := c.received(k, 3, "bbc", streamAt(120)); n != 2 {
		t.Fatalf("second piece completed %d deltas; want 2", n)
	}
	got := c.between(streamAt(0), streamAt(100))
	want := []float64{10, 70, 20}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("latencies %v; want %v", got, want)
		}
	}
}

func TestDeltaClock_KeepsAttemptsApartAndFiltersBySendTime(t *testing.T) {
	c := newDeltaClock()
	first := attemptKey{"stream-000000", "stream-000000-s1", 1}
	retry := attemptKey{"stream-000000", "stream-000000-s1", 2}
	other := attemptKey{"stream-000001", "stream-000001-s1", 1}
	c.streamed(first, 0, 2, streamAt(0))
	c.streamed(retry, 0, 2, streamAt(200))
	c.streamed(other, 0, 2, streamAt(300))
	c.received(retry, 0, "xx", streamAt(204))
	c.received(other, 0, "yy", streamAt(301))
	if got := c.between(streamAt(150), streamAt(250)); len(got) != 1 || got[0] != 4 {
		t.Errorf("latencies sent in [150, 250] ms: %v; want [4]", got)
	}
	if got := c.between(streamAt(0), streamAt(1000)); len(got) != 2 {
		t.Errorf("latencies %v; want two", got)
	}
	// The first attempt's delta never arrived (abandoned).
	if p := c.pending(); p != 1 {
		t.Errorf("%d deltas pending; want 1", p)
	}
}

func TestDeltaClock_UnknownBytes_CountNothing(t *testing.T) {
	c := newDeltaClock()
	k := attemptKey{"s", "s-s1", 1}
	if n := c.received(k, 0, "zz", streamAt(1)); n != 0 {
		t.Fatalf("bytes never streamed completed %d deltas", n)
	}
}

func TestStreamModel_StreamsNumberedDeltasAndAnswersTheirConcatenation(t *testing.T) {
	c := newDeltaClock()
	in := client.ModelInput{SessionID: "stream-000003", StepID: "stream-000003-s2", Attempt: 1}
	out, err := streamModel(c, 5, 0).RunModel(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 5 {
		want.WriteString(deltaText(i))
	}
	if out.Text != want.String() || len(out.ToolCalls) != 0 {
		t.Fatalf("output %q with %d tool calls; want %q and none", out.Text, len(out.ToolCalls), want.String())
	}
	if !strings.Contains(out.Text, "0004") {
		t.Errorf("the deltas carry no sequence number: %q", out.Text)
	}
	// Every delta noted, at the offset its text starts.
	k := attemptKey{in.SessionID, in.StepID, in.Attempt}
	if p := c.pending(); p != 5 {
		t.Fatalf("%d deltas noted; want 5", p)
	}
	if n := c.received(k, 0, out.Text, time.Now()); n != 5 {
		t.Errorf("the whole output completed %d deltas; want 5", n)
	}
}

func TestStreamModel_StopsWhenTheAttemptIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := streamModel(newDeltaClock(), 3, time.Hour).RunModel(ctx, client.ModelInput{StepID: "s"}); err == nil {
		t.Fatal("a cancelled attempt answered")
	}
}

func liveEvent(typ, step string, attempt uint32, offset uint64, text string) *dexv1.Event {
	return &dexv1.Event{Type: typ, StepId: step, Output: &dexv1.OutputDelta{Attempt: attempt, Offset: offset, Text: text}}
}

func TestStreamSession_ObserveTracksTextEndsAndTurns(t *testing.T) {
	c := newDeltaClock()
	s := newStreamSession("stream-000000")
	c.streamed(attemptKey{s.id, "st1", 1}, 0, 3, streamAt(0))
	s.observe(&dexv1.Event{Seq: 1, Type: "session_created"}, streamAt(0), c)
	s.observe(liveEvent("output", "st1", 1, 0, "abc"), streamAt(2), c)
	s.observe(liveEvent("output", "st1", 1, 5, "zz"), streamAt(3), c) // a gap
	s.observe(&dexv1.Event{Seq: 2, Type: "turn_completed"}, streamAt(4), c)
	if err := s.finishTurn(cancelledContext(), 1); err == nil {
		t.Fatal("turn 1 finished before its output ended")
	}
	s.observe(liveEvent("output_ended", "st1", 1, 5, ""), streamAt(5), c)
	if err := s.finishTurn(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	texts, ended, problems, abandoned := s.received()
	if texts[textKey{"st1", 1}] != "abczz" || ended["st1"] != 1 || abandoned != 0 {
		t.Errorf("texts %v, ended %v, abandoned %d", texts, ended, abandoned)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "offset 5 after 3 bytes") {
		t.Errorf("problems %q; want the gap", problems)
	}
	if got := c.between(streamAt(0), streamAt(1)); len(got) != 1 || got[0] != 2 {
		t.Errorf("latencies %v; want [2]", got)
	}
}

func TestStreamSession_AWaitForOutputEndsOnANewAttemptsFirstDelta(t *testing.T) {
	c := newDeltaClock()
	s := newStreamSession("stream-000000")
	s.observe(&dexv1.Event{Seq: 1, Type: "session_created"}, streamAt(0), c)
	s.observe(liveEvent("output", "st1", 1, 0, "ab"), streamAt(1), c)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- s.await(ctx, "a second Step's output", func() bool { return len(s.streamed) >= 2 })
	}()
	s.observe(liveEvent("output", "st1", 1, 2, "cd"), streamAt(2), c) // more of the same attempt
	s.observe(liveEvent("output", "st2", 1, 0, "ef"), streamAt(3), c)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStreamSession_AnErroredSessionEndsTheWait(t *testing.T) {
	s := newStreamSession("stream-000000")
	s.observe(&dexv1.Event{Seq: 3, Type: "session_errored", Detail: "model failed"}, streamAt(0), newDeltaClock())
	err := s.finishTurn(context.Background(), 1)
	if err == nil || !strings.Contains(err.Error(), "errored: model failed") {
		t.Fatalf("error %v; want the session's", err)
	}
}

func cancelledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestCompareStreamed(t *testing.T) {
	committed := map[string]string{"s1": "one two ", "s2": "three ", "s3": "four "}
	texts := map[textKey]string{
		{"s1", 1}: "one two ",
		{"s2", 1}: "thr",    // abandoned attempt
		{"s2", 2}: "three ", // its retry, committed
		{"s3", 1}: "four!",
	}
	ended := map[string]uint32{"s1": 1, "s2": 2, "s3": 1}
	checked, problems := compareStreamed("x", committed, texts, ended)
	if checked != 3 || len(problems) != 1 || !strings.Contains(problems[0], "step s3 attempt 1") || !strings.Contains(problems[0], "first difference at byte 4") {
		t.Fatalf("checked %d, problems %q; want 3 and s3's difference", checked, problems)
	}

	// Equal texts: nothing to say.
	texts[textKey{"s3", 1}] = "four "
	if _, problems := compareStreamed("x", committed, texts, ended); len(problems) != 0 {
		t.Fatalf("problems %q; want none", problems)
	}

	// A committed Step whose end the watcher never heard of, and an ended
	// output nothing committed.
	delete(ended, "s2")
	ended["s9"] = 1
	checked, problems = compareStreamed("x", committed, texts, ended)
	if checked != 2 || len(problems) != 2 || !strings.Contains(problems[0], "step s2: committed, but") || !strings.Contains(problems[1], "step s9: its output ended, but no output") {
		t.Fatalf("checked %d, problems %q", checked, problems)
	}

	// A watcher that got nothing of the committed attempt.
	ended = map[string]uint32{"s1": 2}
	_, problems = compareStreamed("x", map[string]string{"s1": "one two "}, texts, ended)
	if len(problems) != 1 || !strings.Contains(problems[0], "no output of attempt 2") {
		t.Fatalf("problems %q", problems)
	}
}

func TestCommittedOutputs_ReadsTheAssistantTextOfEachStep(t *testing.T) {
	gs := &dexv1.GetSessionResponse{Session: &dexv1.Session{History: []*dexv1.HistoryEntry{
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "turn 1"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "delta 0000; ", StepId: "a-s1"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "turn 2"},
		{Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "delta 0000; delta 0001; ", StepId: "a-s2"},
	}}}
	got := committedOutputs(gs)
	if len(got) != 2 || got["a-s1"] != "delta 0000; " || got["a-s2"] != "delta 0000; delta 0001; " {
		t.Fatalf("committed %v", got)
	}
}

func TestNewStreamPhase_StreamsAtOnce(t *testing.T) {
	lat := make([]float64, 400)
	for i := range lat {
		lat[i] = float64(i%10) + 1
	}
	// 400 deltas in 2 s at 20 a second: 10 streams at once.
	p := newStreamPhase(lat, 10, 2*time.Second, 20, 1<<20)
	if p.StreamsAtOnce != 10 || p.Deltas != 400 || p.Seconds != 2 || p.Latency.P50 != 5 || p.Latency.Max != 10 {
		t.Fatalf("phase %+v, latency %+v", p, p.Latency)
	}
}

func TestPerStream(t *testing.T) {
	if got := perStream(100<<20, 110<<20, 1000); got != 10485.8 {
		t.Errorf("per stream %v; want 10485.8", got)
	}
	if got := perStream(0, 110<<20, 1000); got != 0 {
		t.Errorf("per stream from an unread RSS %v; want 0", got)
	}
}

func TestStreamOptionsCheck(t *testing.T) {
	base := options{runs: 1}
	ok := streamOptions{n: 1000, deltas: 40, rate: 20}
	if err := ok.check(base); err != nil {
		t.Fatal(err)
	}
	if err := (streamOptions{}).check(options{runs: 3}); err != nil {
		t.Fatalf("no --stream: %v", err)
	}
	for name, c := range map[string]struct {
		s streamOptions
		o options
	}{
		"negative":  {streamOptions{n: -1}, base},
		"no deltas": {streamOptions{n: 1, deltas: 0, rate: 20}, base},
		"no rate":   {streamOptions{n: 1, deltas: 40}, base},
		"runs":      {ok, options{runs: 2}},
		"steady":    {ok, options{runs: 1, steady: time.Second}},
		"too many":  {streamOptions{n: maxIndex + 1, deltas: 40, rate: 20}, base},
	} {
		if err := c.s.check(c.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got := ok.turnTime(); got != 2*time.Second {
		t.Errorf("turn time %v; want 2s", got)
	}
}

func TestStreamReport_WritesEveryPartAndSurvivesAFailedRun(t *testing.T) {
	alone := newStreamPhase([]float64{0.5, 0.7, 1.2, 3}, 1, 2*time.Second, 2, 60<<20)
	r := &streamReport{Bench: "stream", Config: streamConfig{Streams: 1, Deltas: 40, Rate: 20, DeltaBytes: 12, Sessions: 200, Workers: 4, Concurrency: 8, StreamConcurrency: 1, Nodes: 3, Partitions: 1},
		Plain:  &report{Leader: "n1", StepsPerSec: 1000, Dispatch: newDist([]float64{1, 2}), Turn: newDist([]float64{3})},
		Loaded: &report{Leader: "n2"}, // failed before its figures
		Stream: &streamResult{Alone: alone, LeaderRSSBefore: 50 << 20, LeaderRSSWatched: 51 << 20, RSSPerStream: 10 << 20, StepsChecked: 1,
			TextMismatches: []string{"session stream-000000 step stream-000000-s1 attempt 1: its watcher got 3 bytes, the committed output is 4 (first difference at byte 3)"}},
		LatencyGoalMet: true, Error: "with streams: 1 streamed outputs differ"}
	var b strings.Builder
	r.writeTable(&b)
	for _, want := range []string{"1 stream session,", "steps/s", "streams alone", "1 turn,", "1 differ", "first difference at byte 3",
		"goal, streams alone (one stream: unloaded): p50 < 5 ms and p99 < 20 ms: met", "RSS per stream: 10240.0 KiB", "error: with streams"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	var j strings.Builder
	writeJSON(&j, r)
	for _, want := range []string{`"bench": "stream"`, `"without_streams"`, `"rss_bytes_per_stream"`, `"text_mismatches"`, `"p99_ms": 3`} {
		if !strings.Contains(j.String(), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, j.String())
		}
	}
}

func TestStreamPhase_CPUPerDelta(t *testing.T) {
	p := &streamPhase{Deltas: 600000}
	if got := p.cpuPerDelta(6.03); got != 10.1 {
		t.Errorf("6.03 CPU seconds over 600,000 deltas: %v µs; want 10.1", got)
	}
	if got := (&streamPhase{}).cpuPerDelta(1); got != 0 {
		t.Errorf("no delta: %v µs; want 0", got)
	}
}
