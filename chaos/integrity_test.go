package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
)

const (
	integrityMarker = "marker-AAAA-0001"
	integrityEdit   = "marker-ZZZZ-0001"
)

// A follower's store is damaged while it is stopped: every kind of damage
// makes dexd refuse to start, exit 1 and print one line that names the
// damaged file, so the node never serves or votes on what it holds. Each
// case damages its own copy of the stopped follower's data dir; the last
// one restarts the follower itself on its edited store.
func TestIntegrity_ADamagedStoreIsRefusedInOneLineAndNeverServed(t *testing.T) {
	e := newEnv(t, "--raft-snapshot-threshold", "4", "--raft-snapshot-interval", "300ms")
	id := e.createSession(integrityMarker)
	for range 6 { // enough entries after it for a snapshot that holds it
		e.createSession("filler")
	}
	leader := e.leader()
	var f *Node
	for _, n := range e.cluster.Nodes {
		if n != leader {
			f = n
			break
		}
	}
	raftDir := filepath.Join(f.DataDir, "raft")
	waitUntil(t, 60*time.Second, "the follower's log and a snapshot hold the marker", func() bool {
		db, _ := os.ReadFile(filepath.Join(raftDir, "raft.db"))
		return bytes.Contains(db, []byte(integrityMarker)) && bytes.Contains(newestSnapshot(t, f), []byte(integrityMarker))
	})
	if err := f.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	pristine := filepath.Join(e.dir, "pristine")
	copyDir(t, f.DataDir, pristine)

	if out, code := dexdVerify(t, pristine); code != 0 || !strings.Contains(out, "is intact") {
		t.Fatalf("dexd verify of the intact store: exit %d:\n%s", code, out)
	}

	dbOf := func(dir string) string { return filepath.Join(dir, "raft", "raft.db") }
	pageSize := 4096
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the file the line must name
		want   string
	}{
		{"a same-length edit of a committed message", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				return bytes.ReplaceAll(b, []byte(integrityMarker), []byte(integrityEdit))
			})
			return dbOf(dir)
		}, "raft log entry"},
		{"a flipped bit in a log entry", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				for i := 0; ; {
					j := bytes.Index(b[i:], []byte(integrityMarker))
					if j < 0 {
						return b
					}
					b[i+j+7] ^= 0x01
					i += j + 1
				}
			})
			return dbOf(dir)
		}, "raft log entry"},
		{"a flipped byte in a bolt meta page", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte { b[pageSize+40] ^= 0xff; return b })
			return dbOf(dir)
		}, "meta page 1"},
		{"a zeroed meta page", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte { clear(b[:pageSize]); return b })
			return dbOf(dir)
		}, "meta page 0"},
		{"the zeroed page of the message", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				// Every page holding it: one is in use, others may be freed.
				for {
					i := bytes.Index(b, []byte(integrityMarker))
					if i < 0 {
						return b
					}
					p := i / pageSize * pageSize
					clear(b[p : p+pageSize])
				}
			})
			return dbOf(dir)
		}, "raft.db"},
		{"a truncation to 0 bytes", truncateTo(dbOf, 0), "empty"},
		{"a truncation to 100 bytes", truncateTo(dbOf, 100), "truncated"},
		{"a truncation to one page", truncateTo(dbOf, 4096), "truncated"},
		{"a truncation to 16384 bytes", truncateTo(dbOf, 16384), "truncated"},
		{"a truncation into the last page in use", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				// Page 1's meta (and bbolt's newest, when it is page 0's) says
				// how many pages are in use: cut into the last one.
				pages := max(binary.NativeEndian.Uint64(b[56:]), binary.NativeEndian.Uint64(b[pageSize+56:]))
				return b[:int(pages)*pageSize-pageSize/2]
			})
			return dbOf(dir)
		}, "truncated"},
		{"a flipped bit in a snapshot", func(t *testing.T, dir string) string {
			state := snapshotHolding(t, dir, integrityMarker)
			editFile(t, state, func(b []byte) []byte {
				b[bytes.Index(b, []byte(integrityMarker))+7] ^= 0x01
				return b
			})
			return state
		}, "CRC64"},
		{"a deleted snapshots dir", func(t *testing.T, dir string) string {
			snaps := filepath.Join(dir, "raft", "snapshots")
			if err := os.RemoveAll(snaps); err != nil {
				t.Fatal(err)
			}
			return snaps + " is missing"
		}, "restore this node from its peers"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(e.dir, "damaged-"+string(rune('a'+i)))
			copyDir(t, pristine, dir)
			names := c.damage(t, dir)
			args := replaceArg(f.Args, "--data-dir", dir)
			stderr, code := runDexd(t, args)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], names) || !strings.Contains(lines[0], c.want) {
				t.Fatalf("dexd on %s: exit %d, stderr:\n%s\nwant exit 1 and one line naming %s (%q)", c.name, code, stderr, names, c.want)
			}
			t.Log(lines[0])
			if strings.Contains(c.name, "snapshots dir") && strings.Contains(lines[0], "raft.db is") {
				t.Fatalf("a deleted snapshots dir is blamed on raft.db: %s", lines[0])
			}
			if out, code := dexdVerify(t, dir); code != 1 || !strings.Contains(out, "DAMAGED") {
				t.Fatalf("dexd verify of %s: exit %d:\n%s", c.name, code, out)
			}
		})
	}

	// The follower itself, restarted on its edited store, refuses to start;
	// the cluster keeps serving the message as it was committed.
	editFile(t, dbOf(f.DataDir), func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(integrityMarker), []byte(integrityEdit))
	})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(e.ctx(30 * time.Second)); err == nil || f.Running() {
		t.Fatalf("the follower started on an edited store (wait: %v)", err)
	}
	if !strings.Contains(f.Log(), "raft log entry") {
		t.Fatalf("the follower's log does not name the damaged entry:\n%s", tail(f.Log(), 5))
	}
	if got := prototext.Format(e.get(id)); !strings.Contains(got, integrityMarker) || strings.Contains(got, integrityEdit) {
		t.Fatalf("the cluster serves the session as:\n%s\nwant %q in it", got, integrityMarker)
	}
}

func truncateTo(dbOf func(string) string, size int) func(*testing.T, string) string {
	return func(t *testing.T, dir string) string {
		if err := os.Truncate(dbOf(dir), int64(size)); err != nil {
			t.Fatal(err)
		}
		return dbOf(dir)
	}
}

func editFile(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// snapshotHolding returns the state.bin of a snapshot in dir that holds s.
func snapshotHolding(t *testing.T, dir, s string) string {
	t.Helper()
	states, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "state.bin"))
	for _, p := range states {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			return p
		}
	}
	t.Fatalf("no snapshot in %s holds %q", dir, s)
	return ""
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v: %s", src, err, out)
	}
}

func replaceArg(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := range out[:len(out)-1] {
		if out[i] == flag {
			out[i+1] = value
		}
	}
	return out
}

// runDexd runs dexd to its exit (killed if it is still running after 30 s)
// and returns its stderr and exit code.
func runDexd(t *testing.T, args []string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "dexd"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stderr.String(), 0
	case errors.As(err, &ee):
		return stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run dexd: %v", err)
		return "", -1
	}
}

func dexdVerify(t *testing.T, dir string) (string, int) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "dexd"), "verify", "--data-dir", dir).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		t.Fatalf("dexd verify: %v", err)
		return "", -1
	}
}
