package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/metrics"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// An --archive-url that cannot be opened stops dexd at start with one
// usage line naming the flag and the reason, before anything listens.
func TestArchiveURL_OneThatCannotBeOpenedIsAUsageError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, want string }{
		{"archive/relative", "the scheme must be one of"},
		{"ftp://host/dir", "the scheme must be one of"},
		{"file://host/dir", "names a local directory"},
		{"s3://", "names no bucket"},
		{file + "/sub", "open the archive file://" + file + "/sub"},
	} {
		base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
			"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
		var stderr bytes.Buffer
		code := run(append(base, "--archive-url", tc.url), &stderr)
		out := stderr.String()
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "dexd: --archive-url: ") || !strings.Contains(out, tc.want) {
			t.Errorf("--archive-url %s: exit %d, stderr %q; want exit 2 and one line with %q", tc.url, code, out, tc.want)
		}
	}
}

func counter(t *testing.T, m *metrics.Archive, name string) float64 {
	t.Helper()
	for _, c := range m.Collectors() {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		if strings.Contains((<-ch).String(), `"`+name+`"`) {
			return testutil.ToFloat64(c)
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The leader's archive writes the session's object as the state holds it
// and counts it; a write the archive refuses is an error and a failure.
func TestLeaderArchive_WritesTheSessionFromTheStateAndCountsIt(t *testing.T) {
	c := leasetest.New(t)
	c.CreateSession("s1", "")
	c.Send("s1", "m1", "hello")
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: "s1"}}})
	dir := filepath.Join(t.TempDir(), "archive")
	store, err := openArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := metrics.NewArchive()
	a := leaderArchive{store: store, m: m}
	ctx := context.Background()

	if err := a.Archive(ctx, c.State(), "s1"); err != nil {
		t.Fatal(err)
	}
	want, err := archive.FromState(c.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, "s1")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the archive holds %d bytes (%v); want the state's object of %d", len(got), err, len(want))
	}
	if w, f, b := counter(t, m, "dex_archive_writes_total"), counter(t, m, "dex_archive_failures_total"), counter(t, m, "dex_archive_written_bytes_total"); w != 1 || f != 0 || b != float64(len(want)) {
		t.Fatalf("writes %v, failures %v, bytes %v; want 1, 0, %d", w, f, b, len(want))
	}
	// Written again, the object is the same.
	if err := a.Archive(ctx, c.State(), "s1"); err != nil {
		t.Fatal(err)
	}
	if again, err := store.Get(ctx, "s1"); err != nil || !bytes.Equal(again, want) {
		t.Fatalf("a second write changed the object (%v)", err)
	}

	// A session the state does not hold is not written.
	if err := a.Archive(ctx, c.State(), "nope"); err == nil {
		t.Fatal("archived a session the state does not hold")
	}
	// The objects' directory replaced by a regular file: no write gets
	// through, whoever runs the test.
	if err := os.RemoveAll(filepath.Join(dir, "sessions")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = a.Archive(ctx, c.State(), "s1")
	if err == nil || !strings.Contains(err.Error(), "the archive is not writable") {
		t.Fatalf("a write under a regular file: %v; want the archive is not writable", err)
	}
	if w, f := counter(t, m, "dex_archive_writes_total"), counter(t, m, "dex_archive_failures_total"); w != 2 || f != 2 {
		t.Fatalf("writes %v, failures %v; want 2 and 2", w, f)
	}
}
