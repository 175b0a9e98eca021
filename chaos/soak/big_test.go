package soak

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
)

// The big load reaches each limit without passing it: a message of
// exactly the cluster's limit, reports that leave their envelope free.
func TestBigSizesReachTheLimits(t *testing.T) {
	const payload = 4 << 20
	z := bigSizesFor(payload)
	if z.Message != payload/4 || z.Report != payload-bigEnvelope || z.Report < payload*99/100 {
		t.Fatalf("%+v", z)
	}
	if many := bigCalls * (z.CallArg + 64); many > z.Report || many < z.Report-bigCalls {
		t.Fatalf("%d calls of %d bytes: %d bytes, want about %d", bigCalls, z.CallArg, many, z.Report)
	}
	if m := padTo("tools c1-1 ", z.Message); len(m) != z.Message || m[:11] != "tools c1-1 " {
		t.Fatalf("a big message of %d bytes", len(m))
	}
	raw, err := bigScript(z)
	if err != nil {
		t.Fatal(err)
	}
	var script struct {
		Turns []struct {
			Match   string
			Outputs []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(raw), &script); err != nil {
		t.Fatal(err)
	}
	big := map[string]int{}
	fill := regexp.MustCompile(`\{\{fill:(\d+)\}\}|"result_bytes":(\d+)`)
	for _, turn := range script.Turns {
		for _, o := range turn.Outputs {
			for _, m := range fill.FindAllStringSubmatch(string(o), -1) {
				n, _ := strconv.Atoi(m[1] + m[2])
				big[turn.Match] += n
			}
		}
	}
	for match, want := range map[string]int{"bigout": z.Report, "bigresult": 2*z.Report - 64, "bigcalls": bigCalls * z.CallArg, "bigerror": 2 * z.Report} {
		if big[match] != want {
			t.Errorf("turn %s asks for %d bytes, want %d", match, big[match], want)
		}
	}
	if big["tools"] != 0 || len(script.Turns) != 12 {
		t.Errorf("the soak's own turns changed: %d turns, %v", len(script.Turns), big)
	}
}
