//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/chaos/harness"
	"google.golang.org/protobuf/encoding/prototext"
)

const (
	integrityMarker = "marker-AAAA-0001"
	integrityEdit   = "marker-ZZZZ-0001"
)

// A follower's store is damaged while it is stopped: every kind of damage
// makes dexd refuse to start, exit 1 and print one line that names the
// damaged file or directory, so the node never serves or votes on what it
// holds. The log is in raft/wal (raft-wal's segment files and wal-meta.db);
// raft.db holds the term, the vote and Dex's keys. Each case damages its
// own copy of the stopped follower's data dir; the last one restarts the
// follower itself on its edited store.
func TestIntegrity_ADamagedStoreIsRefusedInOneLineAndNeverServed(t *testing.T) {
	e := newEnv(t, "--raft-snapshot-threshold", "4", "--raft-snapshot-interval", "300ms")
	id := e.createSession(integrityMarker)
	for range 6 { // enough entries after it for a snapshot that holds it
		e.createSession("filler")
	}
	leader := e.leader()
	var f *harness.Node
	for _, n := range e.cluster.Nodes {
		if n != leader {
			f = n
			break
		}
	}
	waitUntil(t, 60*time.Second, "the follower's WAL and a snapshot hold the marker", func() bool {
		return walHolds(f.DataDir, integrityMarker) && bytes.Contains(newestSnapshot(t, f), []byte(integrityMarker))
	})
	// The follower's last entry must be in its log only: a cut log then
	// loses an entry no snapshot holds, which is what the stored-up-to mark
	// guards. A snapshot taken before the stop may hold it: then again.
	for attempt := 1; ; attempt++ {
		last := fmt.Sprintf("integrity-last-%d", attempt)
		e.createSession(last)
		waitUntil(t, 60*time.Second, "the follower's WAL holds "+last, func() bool { return walHolds(f.DataDir, last) })
		if err := f.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(newestSnapshot(t, f), []byte(last)) {
			break
		}
		t.Logf("the follower's newest snapshot holds its last entry %s: again", last)
		if attempt == 5 {
			t.Fatalf("the follower's newest snapshot held its last entry %d times", attempt)
		}
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
	}
	pristine := filepath.Join(e.dir, "pristine")
	copyDir(t, f.DataDir, pristine)

	out, code := dexdVerify(t, pristine)
	if code != 0 || !strings.Contains(out, "is intact") {
		t.Fatalf("dexd verify of the intact store: exit %d:\n%s", code, out)
	}
	t.Logf("dexd verify of the intact store:\n%s", out)
	for _, p := range append(walSegments(t, pristine), dbOf(pristine), walMetaOf(pristine)) {
		if st, err := os.Stat(p); err == nil {
			t.Logf("%s: %d bytes", p, st.Size())
		}
	}

	pageSize := 4096
	lost := []string{"cut or lost", "raft log entry"}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns what the line must name
		want   []string                              // the line holds one of these
	}{
		// The log, in raft/wal's segment files.
		{"a same-length edit of a committed message in the WAL", func(t *testing.T, dir string) string {
			editSegments(t, dir, func(b []byte) []byte {
				return bytes.ReplaceAll(b, []byte(integrityMarker), []byte(integrityEdit))
			})
			return walOf(dir)
		}, []string{"raft log entry"}},
		{"a flipped bit in a log entry in the WAL", func(t *testing.T, dir string) string {
			editSegments(t, dir, func(b []byte) []byte {
				for i := 0; ; {
					j := bytes.Index(b[i:], []byte(integrityMarker))
					if j < 0 {
						return b
					}
					b[i+j+7] ^= 0x01
					i += j + 1
				}
			})
			return walOf(dir)
		}, []string{"raft log entry"}},
		{"a flipped bit in the length of the message's WAL frame", func(t *testing.T, dir string) string {
			editSegments(t, dir, func(b []byte) []byte {
				p := walFrameAt(t, b, bytes.Index(b, []byte(integrityMarker)))
				b[p+4] ^= 0x01
				return b
			})
			return walOf(dir)
		}, lost},
		{"the zeroed page of the message in the WAL", func(t *testing.T, dir string) string {
			editSegments(t, dir, func(b []byte) []byte {
				for {
					i := bytes.Index(b, []byte(integrityMarker))
					if i < 0 {
						return b
					}
					p := i / pageSize * pageSize
					clear(b[p : p+pageSize])
				}
			})
			return walOf(dir)
		}, lost},
		{"the WAL's tail segment truncated to 0 bytes", func(t *testing.T, dir string) string {
			truncateFile(t, walTail(t, dir), 0)
			return walOf(dir)
		}, lost},
		{"the WAL's tail segment truncated to 100 bytes", func(t *testing.T, dir string) string {
			truncateFile(t, walTail(t, dir), 100)
			return walOf(dir)
		}, lost},
		{"the WAL's tail segment cut just after the message", func(t *testing.T, dir string) string {
			tailSeg := walTail(t, dir)
			b, err := os.ReadFile(tailSeg)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.LastIndex(b, []byte(integrityMarker))
			if i < 0 {
				t.Fatalf("the tail segment %s does not hold the message", tailSeg)
			}
			truncateFile(t, tailSeg, i+len(integrityMarker))
			return walOf(dir)
		}, lost},
		{"a deleted WAL tail segment", func(t *testing.T, dir string) string {
			if err := os.Remove(walTail(t, dir)); err != nil {
				t.Fatal(err)
			}
			return walOf(dir)
		}, []string{"cut or lost"}},
		{"a flipped byte in a bolt meta page of wal-meta.db", func(t *testing.T, dir string) string {
			editFile(t, walMetaOf(dir), func(b []byte) []byte { b[pageSize+40] ^= 0xff; return b })
			return walMetaOf(dir)
		}, []string{"meta page 1"}},
		{"a zeroed meta page of wal-meta.db", func(t *testing.T, dir string) string {
			editFile(t, walMetaOf(dir), func(b []byte) []byte { clear(b[:pageSize]); return b })
			return walMetaOf(dir)
		}, []string{"meta page 0"}},
		// raft.db: the stable store, a bolt file.
		{"a flipped byte in a bolt meta page of raft.db", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte { b[pageSize+40] ^= 0xff; return b })
			return dbOf(dir)
		}, []string{"meta page 1"}},
		{"a zeroed meta page of raft.db", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte { clear(b[:pageSize]); return b })
			return dbOf(dir)
		}, []string{"meta page 0"}},
		{"the zeroed page of the term in raft.db", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				// Every page holding it: one is in use, others may be freed.
				n := 0
				for ; ; n++ {
					i := bytes.Index(b, []byte("CurrentTerm"))
					if i < 0 {
						break
					}
					p := i / pageSize * pageSize
					clear(b[p : p+pageSize])
				}
				if n == 0 {
					t.Fatalf("raft.db holds no CurrentTerm")
				}
				return b
			})
			return dbOf(dir)
		}, []string{"is damaged"}},
		{"raft.db truncated to 0 bytes", truncateDB(0), []string{"empty"}},
		{"raft.db truncated to 100 bytes", truncateDB(100), []string{"truncated"}},
		{"raft.db truncated to one page", truncateDB(4096), []string{"truncated"}},
		{"raft.db truncated to 16384 bytes", truncateDB(16384), []string{"truncated"}},
		{"raft.db truncated into the last page in use", func(t *testing.T, dir string) string {
			editFile(t, dbOf(dir), func(b []byte) []byte {
				// Page 1's meta (and bbolt's newest, when it is page 0's) says
				// how many pages are in use: cut into the last one.
				pages := max(binary.NativeEndian.Uint64(b[56:]), binary.NativeEndian.Uint64(b[pageSize+56:]))
				return b[:int(pages)*pageSize-pageSize/2]
			})
			return dbOf(dir)
		}, []string{"truncated"}},
		// The snapshots.
		{"a flipped bit in a snapshot", func(t *testing.T, dir string) string {
			state := snapshotHolding(t, dir, integrityMarker)
			editFile(t, state, func(b []byte) []byte {
				b[bytes.Index(b, []byte(integrityMarker))+7] ^= 0x01
				return b
			})
			return state
		}, []string{"CRC64"}},
		{"a deleted snapshots dir", func(t *testing.T, dir string) string {
			snaps := filepath.Join(dir, "raft", "snapshots")
			if err := os.RemoveAll(snaps); err != nil {
				t.Fatal(err)
			}
			return snaps + " is missing"
		}, []string{"restore this node from its peers"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(e.dir, "damaged-"+string(rune('a'+i)))
			copyDir(t, pristine, dir)
			names := c.damage(t, dir)
			args := replaceArg(f.Args, "--data-dir", dir)
			stderr, code := runDexd(t, args)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], names) || !containsAny(lines[0], c.want) {
				t.Fatalf("dexd on %s: exit %d, stderr:\n%s\nwant exit 1 and one line naming %s (%q)", c.name, code, stderr, names, c.want)
			}
			t.Log(lines[0])
			if strings.Contains(c.name, "snapshots dir") && (strings.Contains(lines[0], "raft.db is") || strings.Contains(lines[0], "raft/wal is")) {
				t.Fatalf("a deleted snapshots dir is blamed on the log: %s", lines[0])
			}
			out, code := dexdVerify(t, dir)
			if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, names) {
				t.Fatalf("dexd verify of %s: exit %d:\n%s\nwant exit 1, DAMAGED and %s", c.name, code, out, names)
			}
		})
	}

	// The follower itself, restarted on its edited store, refuses to start;
	// the cluster keeps serving the message as it was committed.
	editSegments(t, f.DataDir, func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(integrityMarker), []byte(integrityEdit))
	})
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	if err := f.Wait(e.ctx(30 * time.Second)); err == nil || f.Running() {
		t.Fatalf("the follower started on an edited store (wait: %v)", err)
	}
	if !strings.Contains(f.Log(), "raft log entry") || !strings.Contains(f.Log(), walOf(f.DataDir)) {
		t.Fatalf("the follower's log does not name the damaged entry in %s:\n%s", walOf(f.DataDir), harness.Tail(f.Log(), 5))
	}
	if got := prototext.Format(e.get(id)); !strings.Contains(got, integrityMarker) || strings.Contains(got, integrityEdit) {
		t.Fatalf("the cluster serves the session as:\n%s\nwant %q in it", got, integrityMarker)
	}
}

func dbOf(dir string) string      { return filepath.Join(dir, "raft", "raft.db") }
func walOf(dir string) string     { return filepath.Join(dir, "raft", "wal") }
func walMetaOf(dir string) string { return filepath.Join(walOf(dir), "wal-meta.db") }

// walSegments returns the WAL's segment files in order (their names start
// with their first index, zero-padded); the last is the open tail.
func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(walOf(dir), "*.wal"))
	if len(segs) == 0 {
		t.Fatalf("no WAL segment in %s", walOf(dir))
	}
	sort.Strings(segs)
	return segs
}

func walTail(t *testing.T, dir string) string {
	segs := walSegments(t, dir)
	return segs[len(segs)-1]
}

// walHolds reports whether a segment file of dir's WAL holds s.
func walHolds(dir, s string) bool {
	segs, _ := filepath.Glob(filepath.Join(walOf(dir), "*.wal"))
	for _, p := range segs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// editSegments edits every segment file that holds the message.
func editSegments(t *testing.T, dir string, edit func([]byte) []byte) {
	t.Helper()
	n := 0
	for _, p := range walSegments(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(integrityMarker)) {
			editFile(t, p, func([]byte) []byte { return edit(b) })
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no WAL segment in %s holds the message", walOf(dir))
	}
}

// walFrameAt returns the offset of the frame holding byte off of a raft-wal
// segment: a 32-byte file header, then frames of an 8-byte header (type,
// 3 reserved bytes, little-endian length; a commit frame's is its CRC and it
// has no payload) and the payload padded to 8 bytes.
func walFrameAt(t *testing.T, b []byte, off int) int {
	t.Helper()
	const entry, index = 1, 2
	for p := 32; off >= 0 && p+8 <= len(b) && b[p] != 0; {
		n := 0
		if b[p] == entry || b[p] == index {
			n = (int(binary.LittleEndian.Uint32(b[p+4:])) + 7) &^ 7
		}
		if off < p+8+n {
			return p
		}
		p += 8 + n
	}
	t.Fatalf("no WAL frame holds byte %d", off)
	return -1
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func truncateDB(size int) func(*testing.T, string) string {
	return func(t *testing.T, dir string) string {
		truncateFile(t, dbOf(dir), size)
		return dbOf(dir)
	}
}

// truncateFile cuts path to size bytes, which must be shorter than it is.
func truncateFile(t *testing.T, path string, size int) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() <= int64(size) {
		t.Fatalf("%s is %d bytes: cutting it to %d bytes is no truncation", path, st.Size(), size)
	}
	if err := os.Truncate(path, int64(size)); err != nil {
		t.Fatal(err)
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
