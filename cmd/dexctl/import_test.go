package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/archivetest"
	"github.com/dexhq/dex/api/archive/format"
)

// A session exported from one cluster is imported into another from a
// file and from standard input; exported there it is the same bytes but
// for its deletion time. A second import of it, a damaged file and a
// missing one are one clear error each.
func TestSessionImport_ExportThenImportIntoAnotherCluster(t *testing.T) {
	src, dst := archivetest.Start(t), archivetest.Start(t)
	src.Busy("s1", 2)
	src.Close("s1")
	src.Idle("quiet")
	file := filepath.Join(t.TempDir(), "s1.dexsession")
	if _, err := run(t, "--addr", src.Addr, "session", "export", "s1", "--out", file); err != nil {
		t.Fatal(err)
	}
	exported, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want, err := format.Decode(exported)
	if err != nil {
		t.Fatal(err)
	}

	out, err := run(t, "--addr", dst.Addr, "session", "import", file)
	if err != nil {
		t.Fatal(err)
	}
	line := "imported s1: " + plural(len(want.Session.History), "history entry", "history entries") + ", " +
		plural(len(want.Steps), "Step", "Steps") + ", " + plural(len(want.Events), "event", "events") + "\n"
	if out != line {
		t.Fatalf("dexctl session import printed %q; want %q", out, line)
	}
	again, err := run(t, "--addr", dst.Addr, "session", "export", "s1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := format.Decode([]byte(again))
	if err != nil {
		t.Fatal(err)
	}
	got.Session.DeleteAtMs = want.Session.DeleteAtMs
	if same, _ := format.Encode(got); !bytes.Equal(same, exported) {
		t.Fatal("the export of the imported session differs from the one imported beyond delete_at_ms")
	}

	// From standard input, with --json.
	quiet, err := archive.FromState(src.Node.State(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	cmd := newRootCmd()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetIn(bytes.NewReader(quiet))
	cmd.SetArgs([]string{"--addr", dst.Addr, "session", "import", "-", "--json"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var js struct {
		ID                     string
		History, Steps, Events uint64
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil || js.ID != "quiet" || js.History != 2 || js.Steps != 1 {
		t.Fatalf("--json printed %s (%v); want quiet with 2 history entries and 1 Step", buf.String(), err)
	}

	damaged := filepath.Join(t.TempDir(), "damaged.dexsession")
	bad := append([]byte{}, exported...)
	bad[len(bad)-1] ^= 1
	if err := os.WriteFile(damaged, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "import", file}, `session "s1" already exists`},
		{[]string{"session", "import", damaged}, "not an importable archived session: damaged archived session: its SHA-256 does not match"},
		{[]string{"session", "import", filepath.Join(t.TempDir(), "nothing")}, "read the archived session: open "},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(append([]string{"--addr", dst.Addr}, tc.args...), &stdout, &stderr)
		msg := stderr.String()
		if code != 1 || stdout.Len() != 0 || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("dexctl %s: exit %d, %q; want exit 1 and one line with %q", strings.Join(tc.args, " "), code, msg, tc.want)
		}
	}
}
