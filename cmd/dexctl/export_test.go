package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/archivetest"
	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// An export from the cluster is the archive format, the bytes the leader
// archives; once the cluster no longer holds the session, the same bytes
// come from the archive.
func TestSessionExport_FromTheClusterThenFromTheArchive(t *testing.T) {
	c := archivetest.Start(t)
	c.Busy("s1", 2)
	c.Idle("gone")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := run(t, "--addr", c.Addr, "session", "export", "s1")
	if err != nil {
		t.Fatal(err)
	}
	want, err := archive.FromState(c.Node.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal([]byte(out), want) {
		t.Fatalf("dexctl session export printed %d bytes; want the %d of the archive format", len(out), len(want))
	}

	// The leader archives "gone", then it leaves the cluster.
	dir := t.TempDir()
	url := "file://" + dir
	archived, err := archive.FromState(c.Node.State(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	store, err := archive.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Put(ctx, "gone", archived); err != nil {
		t.Fatal(err)
	}
	if _, err := dexv1.NewSessionServiceClient(c.Conn).DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "--addr", c.Addr, "session", "export", "gone"); err == nil || err.Error() != `session "gone" not found` {
		t.Fatalf("export of a deleted session without --archive-url: %v; want the cluster's NotFound", err)
	}
	file := filepath.Join(t.TempDir(), "gone.dexsession")
	if _, err := run(t, "--addr", c.Addr, "session", "export", "gone", "--archive-url", url, "--out", file); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, archived) {
		t.Fatalf("--out holds %d bytes (%v); want the %d archived", len(got), err, len(archived))
	}

	// --json: the session readable, from the archive as from the cluster.
	out, err = run(t, "--addr", c.Addr, "session", "export", "gone", "--archive-url", url, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Session struct {
			ID      string            `json:"id"`
			History []json.RawMessage `json:"history"`
		} `json:"session"`
		Steps []struct {
			Attempts []json.RawMessage `json:"attempts"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if js.Session.ID != "gone" || len(js.Session.History) != 2 || len(js.Steps) != 1 || len(js.Steps[0].Attempts) != 1 {
		t.Fatalf("--json printed %s", out)
	}

	if _, err := run(t, "--addr", c.Addr, "session", "export", "never", "--archive-url", url); err == nil ||
		!strings.Contains(err.Error(), `session "never" is neither in the cluster nor in the archive `+url) {
		t.Fatalf("export of a session found nowhere: %v", err)
	}
}

func TestSessionExport_ADamagedArchiveOrABadURLIsAClearError(t *testing.T) {
	c := archivetest.Start(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessions", "cut.dexsession"), []byte(format.Magic+"abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "--addr", c.Addr, "session", "export", "cut", "--archive-url", "file://"+dir); err == nil || !strings.Contains(err.Error(), "damaged archived session") {
		t.Fatalf("export of a truncated object: %v", err)
	}
	if _, err := run(t, "--addr", c.Addr, "session", "export", "cut", "--archive-url", "ftp://x"); err == nil || !strings.Contains(err.Error(), "the scheme must be one of") {
		t.Fatalf("export with a bad --archive-url: %v", err)
	}
}
