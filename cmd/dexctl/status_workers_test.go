package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestStatusShowsUnhealthyWorkers(t *testing.T) {
	r := &dexv1.StatusResponse{Leader: "n1", Workers: []*dexv1.WorkerHealth{
		{WorkerId: "stuck", Unhealthy: true, UnclaimedInARow: 2, UnclaimedExpiries: 3},
		{WorkerId: "ok", UnclaimedExpiries: 1},
	}}
	var text bytes.Buffer
	printStatus(&text, r)
	out := text.String()
	for _, want := range []string{"stuck", "unhealthy", "ok", "healthy"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status output lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	if err := printStatusJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var got statusJSON
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Workers) != 2 || got.Workers[0].ID != "stuck" || got.Workers[0].Healthy || got.Workers[0].UnclaimedInARow != 2 || !got.Workers[1].Healthy {
		t.Fatalf("JSON workers %+v", got.Workers)
	}

	text.Reset()
	printStatus(&text, &dexv1.StatusResponse{Leader: "n1"})
	if strings.Contains(text.String(), "WORKER") {
		t.Fatalf("a cluster without such Workers lists them:\n%s", text.String())
	}
}
