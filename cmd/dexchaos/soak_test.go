package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSoakFlagsRefuseWhatCannotRun(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "1s"}, "--duration must be at least 10s"},
		{[]string{"--faults", "kill-leader,meteor"}, `unknown fault kind "meteor"`},
		{[]string{"--clients", "0"}, "--clients and --workers must be at least 1"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--big", "--max-payload", "1000"}, "--max-payload must be at least 65536"},
		{[]string{"--archive"}, "--archive needs --retention"},
		{[]string{"--retention", "-1s"}, "--retention must not be negative"},
		{[]string{"--retention", "5m", "--sample-every", "10ms"}, "--sample-every must be at least 1s"},
		{[]string{"--partitions", "0"}, "--partitions must be at least 1"},
	} {
		var stderr bytes.Buffer
		if code := run(append([]string{"soak"}, c.args...), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

func TestSoakFlags(t *testing.T) {
	c, err := parseSoakFlags([]string{"--duration", "1h", "--seed", "7", "--faults", "kill-leader,transfer"}, &bytes.Buffer{})
	if err != nil || c.duration.Hours() != 1 || c.seed != 7 || len(c.faults) != 2 || c.big || c.maxPayload != 4<<20 {
		t.Fatalf("%+v, %v", c, err)
	}
	c, err = parseSoakFlags([]string{"--big", "--max-payload", "1048576"}, &bytes.Buffer{})
	if err != nil || !c.big || c.maxPayload != 1<<20 || c.retention != 0 || c.archive {
		t.Fatalf("%+v, %v", c, err)
	}
	c, err = parseSoakFlags([]string{"--duration", "60m", "--retention", "5m", "--archive"}, &bytes.Buffer{})
	if err != nil || c.retention.Minutes() != 5 || !c.archive || c.sampleEvery.Minutes() != 1 {
		t.Fatalf("%+v, %v", c, err)
	}
}

func TestSoakPartitionsFlag(t *testing.T) {
	c, err := parseSoakFlags(nil, &bytes.Buffer{})
	if err != nil || c.partitions != 1 {
		t.Fatalf("default: %+v, %v", c, err)
	}
	c, err = parseSoakFlags([]string{"--partitions", "3", "--duration", "3m"}, &bytes.Buffer{})
	if err != nil || c.partitions != 3 {
		t.Fatalf("--partitions 3: %+v, %v", c, err)
	}
}
