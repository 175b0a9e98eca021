//go:build e2e

package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// archivedSession creates a session that answers one message, kept for
// retention once closed, and waits until it is idle.
func (e *env) archivedSession(name string, retention time.Duration) string {
	e.t.Helper()
	s, err := e.client.CreateSession(e.ctx(20*time.Second), &dexv1.CreateSessionRequest{
		SessionId: fmt.Sprintf("%s-%d", name, time.Now().UnixNano()), Message: "what is the weather?", RetentionMs: proto.Int64(retention.Milliseconds()),
	})
	if err != nil {
		e.t.Fatalf("create session: %v", err)
	}
	e.waitStatus(s.Id, sIdle, 30*time.Second)
	return s.Id
}

func (e *env) closeSession(id string) {
	e.t.Helper()
	if _, err := e.client.CloseSession(e.ctx(20*time.Second), id); err != nil {
		e.t.Fatalf("close session %s: %v", id, err)
	}
}

// export is `dexctl session export ID` (with --archive-url when url is
// set): the object's bytes.
func (e *env) export(id, url string) []byte {
	e.t.Helper()
	out := filepath.Join(e.t.TempDir(), id+".dexsession")
	args := []string{"--addr", strings.Join(e.cluster.GRPCAddrs(), ","), "session", "export", id, "--out", out}
	if url != "" {
		args = append(args, "--archive-url", url)
	}
	if b, err := exec.Command(filepath.Join(binDir, "dexctl"), args...).CombinedOutput(); err != nil {
		e.t.Fatalf("dexctl %s: %v: %s", strings.Join(args, " "), err, b)
	}
	obj, err := os.ReadFile(out)
	if err != nil {
		e.t.Fatal(err)
	}
	return obj
}

// waitGone waits until the cluster no longer holds session id.
func (e *env) waitGone(id string, d time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := e.client.GetSession(e.ctx(20*time.Second), id)
		if status.Code(err) == codes.NotFound {
			return
		}
		if err != nil && !retryableCode(err) {
			e.t.Fatalf("get session %s: %v", id, err)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("session %s is still in the cluster after %s (%v)", id, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func retryableCode(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

// metricValue reads one series without labels from a node's /metrics
// (0 when the node does not answer).
func metricValue(n *harness.Node, name string) float64 {
	resp, err := harness.HTTPClient.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

func (e *env) archiveMetric(name string) float64 {
	sum := 0.0
	for _, n := range e.cluster.Nodes {
		sum += metricValue(n, name)
	}
	return sum
}

// objectFile is where a file:// archive keeps session id.
func objectFile(dir, id string) string {
	return filepath.Join(dir, filepath.FromSlash(archive.Key(id)))
}

// Closed sessions past their retention, and an idle one past
// --session-retention, leave the cluster only once the archive holds them;
// each archived object is byte for byte the export taken while the cluster
// still held the session. Every session is created, closed and exported
// within a second or so; the closed ones' retention ends well before the
// idle retention, which the test then waits out.
func TestArchive_SessionsLeaveOnlyArchivedAndExportTheSameBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive") // one archive for every node, as a shared bucket
	e := newEnv(t, "--archive-url", dir, "--session-retention", "10s")
	e.startWorker("")

	ids := []string{e.archivedSession("a", 5*time.Second), e.archivedSession("b", 5*time.Second), e.archivedSession("c", 5*time.Second)}
	idle := e.archivedSession("idle", 0) // never closed: the idle retention deletes it
	before := map[string][]byte{idle: e.export(idle, "")}
	for _, id := range ids {
		e.closeSession(id)
		before[id] = e.export(id, "")
	}
	for id := range before {
		e.waitGone(id, 90*time.Second)
	}
	for id, want := range before {
		got := e.export(id, "file://"+dir) // the cluster has it no more: from the archive
		if !bytes.Equal(got, want) {
			t.Fatalf("session %s: the archive exports %d bytes, the cluster exported %d before the delete; want the same bytes", id, len(got), len(want))
		}
		s, err := format.Decode(got)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Steps) == 0 || len(s.Session.History) < 2 {
			t.Fatalf("session %s archived with %d Steps and %d history entries; want its turn", id, len(s.Steps), len(s.Session.History))
		}
		if _, err := os.Stat(objectFile(dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	// Every node exports the counters, the followers at zero, so the alert
	// rule finds them wherever it looks.
	for _, n := range e.cluster.Nodes {
		have := scrape(t, "http://"+n.HTTPAddr+"/metrics")
		for _, m := range []string{"dex_archive_writes_total", "dex_archive_failures_total", "dex_archive_written_bytes_total"} {
			if !have[m] {
				t.Fatalf("%s does not export %s", n.ID, m)
			}
		}
	}
	if w, f := e.archiveMetric("dex_archive_writes_total"), e.archiveMetric("dex_archive_failures_total"); w < float64(len(before)) || f != 0 {
		t.Fatalf("dex_archive_writes_total %v, dex_archive_failures_total %v over the nodes; want at least %d writes and no failure", w, f, len(before))
	}
}

// The leader is SIGKILLed after it wrote a session to the archive and
// before it proposed the delete (the failpoint dexAfterArchiveWrite holds
// it there): the new leader writes the same object again, then deletes
// the session. Nothing is lost and the archive holds one object.
func TestArchive_ALeaderKilledBetweenTheWriteAndTheDeleteLeavesTheSameObject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	e, fp := newFailpointEnv(t, chaosBinDir(t), "", 3, "--archive-url", dir)
	e.startWorker("")
	id := e.archivedSession("k", 2*time.Second)
	leader := e.leader()
	if err := harness.SetFailpoint(fp[leader], harness.FailpointAfterArchiveWrite, `sleep("120s")`); err != nil {
		t.Fatal(err)
	}
	e.closeSession(id)
	want := e.export(id, "")

	// The leader wrote the object and waits at the failpoint; the session
	// is still in the cluster.
	deadline := time.Now().Add(60 * time.Second)
	for !fileExists(objectFile(dir, id)) || failpointCount(fp[leader], harness.FailpointAfterArchiveWrite) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never wrote the session and reached %s", leader.ID, harness.FailpointAfterArchiveWrite)
		}
		time.Sleep(50 * time.Millisecond)
	}
	first, err := os.ReadFile(objectFile(dir, id))
	if err != nil || !bytes.Equal(first, want) {
		t.Fatalf("the object written before the kill is %d bytes (%v); want the export's %d", len(first), err, len(want))
	}
	e.get(id) // still held
	leader.Kill()

	e.waitGone(id, 90*time.Second)
	var rewrites float64
	for _, n := range e.cluster.Nodes {
		if n != leader {
			rewrites += metricValue(n, "dex_archive_writes_total")
		}
	}
	if rewrites < 1 {
		t.Fatal("the session was deleted and no surviving node wrote it to the archive")
	}
	got := e.export(id, "file://"+dir)
	if !bytes.Equal(got, want) {
		t.Fatalf("after the takeover the archive exports %d bytes; want the %d the cluster exported before", len(got), len(want))
	}
	files, err := os.ReadDir(filepath.Join(dir, "sessions"))
	if err != nil || len(files) != 1 || files[0].Name() != id+".dexsession" {
		t.Fatalf("the archive holds %v (%v); want the session's one object", files, err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// unwritable makes the archive directory refuse writes, and returns what
// it did and how to undo it. A test running as root writes through a mode
// of 0500, so there the directory is made immutable (chattr +i, which
// refuses root as a read-only mount does); where the file system has no
// such attribute, the objects' directory is replaced by a regular file.
func unwritable(t *testing.T, dir string) (how string, undo func()) {
	t.Helper()
	probe := func() bool {
		err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600)
		_ = os.Remove(filepath.Join(dir, "probe"))
		return err != nil
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		if probe() {
			return "a read-only directory (mode 0500)", func() { _ = os.Chmod(dir, 0o700) }
		}
		_ = os.Chmod(dir, 0o700)
	}
	if exec.Command("chattr", "+i", dir).Run() == nil {
		if probe() {
			return "an immutable directory (chattr +i)", func() {
				if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
					t.Errorf("chattr -i %s: %v: %s", dir, err, out)
				}
			}
		}
		_ = exec.Command("chattr", "-i", dir).Run()
	}
	objects := filepath.Join(dir, "sessions")
	if err := os.RemoveAll(objects); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(objects, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return "the objects' directory replaced by a regular file", func() { _ = os.Remove(objects) }
}

// An archive that refuses writes holds the deletes back: the sessions stay,
// the leader logs one line for it (not one per session or per tick), the
// failures are counted, and live sessions go on. Once the directory takes
// writes again the sessions are archived, then deleted.
func TestArchive_AnUnwritableArchiveHoldsTheDeletesAndTheClusterServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	e := newEnv(t, "--archive-url", dir) // dexd makes the directory
	how, undo := unwritable(t, dir)
	archiveRefusesWrites(t, e, dir, how, "the archive is not writable", undo)
}

// An archive on a full file system holds the deletes back the same way,
// and names the cause: the archive is full.
func TestArchive_AFullArchiveHoldsTheDeletesAndTheClusterServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	how, undo := full(t, dir)
	e := newEnv(t, "--archive-url", dir)
	archiveRefusesWrites(t, e, dir, how, "the archive is full", undo)
}

// full mounts a small tmpfs at dir and fills it, and returns what it did and
// how to make room again. It needs root (mount); elsewhere the test skips.
func full(t *testing.T, dir string) (how string, undo func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("filling a file system for the archive needs root (mount -t tmpfs)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			break // ENOSPC: the file system is full
		}
	}
	_ = f.Close()
	return "a 1 MiB tmpfs filled to the last block", func() { _ = os.Remove(filler) }
}

// archiveRefusesWrites checks what an archive that refuses writes (the
// reason given by problem, as the leader names it) does to the cluster, then
// undoes it and checks the sessions are archived and deleted.
func archiveRefusesWrites(t *testing.T, e *env, dir, how, problem string, undo func()) {
	t.Helper()
	e.startWorker("")
	t.Cleanup(undo)
	t.Logf("the archive refuses writes: %s", how)

	ids := []string{e.archivedSession("a", time.Second), e.archivedSession("b", time.Second), e.archivedSession("c", time.Second)}
	before := map[string][]byte{}
	for _, id := range ids {
		e.closeSession(id)
		before[id] = e.export(id, "")
	}
	// Two failing rounds at least: each tries the three sessions.
	deadline := time.Now().Add(60 * time.Second)
	for e.archiveMetric("dex_archive_failures_total") < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("dex_archive_failures_total %v after a minute of an unwritable archive", e.archiveMetric("dex_archive_failures_total"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, id := range ids {
		if s := e.get(id).Session; s.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED {
			t.Fatalf("session %s is %s while the archive refuses writes; want it kept, closed", id, s.Status)
		}
	}
	leader := e.leader()
	var failLines []string
	for _, line := range strings.Split(leader.Log(), "\n") {
		if strings.Contains(line, "archive writes fail") {
			failLines = append(failLines, line)
		}
	}
	if len(failLines) != 1 || !strings.Contains(failLines[0], problem) || !strings.Contains(failLines[0], "not deleted") {
		t.Fatalf("the leader logged %d lines about the failing archive:\n%s\nwant one that says %q and that nothing is deleted", len(failLines), strings.Join(failLines, "\n"), problem)
	}
	t.Logf("the leader's line: %s", failLines[0])
	if w := e.archiveMetric("dex_archive_writes_total"); w != 0 {
		t.Fatalf("dex_archive_writes_total %v while every write fails", w)
	}

	// Live sessions keep working.
	live := e.createSession("what is the weather?")
	e.waitStatus(live, sIdle, 30*time.Second)
	if _, err := e.client.SendMessage(e.ctx(20*time.Second), live, "and tomorrow?", "m2"); err != nil {
		t.Fatal(err)
	}
	e.waitFor(live, 30*time.Second, "a second answer", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && len(r.Session.History) >= 4
	})

	undo()
	for _, id := range ids {
		e.waitGone(id, 60*time.Second)
	}
	for _, id := range ids {
		if got := e.export(id, "file://"+dir); !bytes.Equal(got, before[id]) {
			t.Fatalf("session %s: the archive exports %d bytes; want the %d exported before", id, len(got), len(before[id]))
		}
	}
	if e.get(live).Session.Status != sIdle {
		t.Fatal("the live session changed")
	}
	if w := e.archiveMetric("dex_archive_writes_total"); w < float64(len(ids)) {
		t.Fatalf("dex_archive_writes_total %v; want at least %d", w, len(ids))
	}
	if !strings.Contains(e.leader().Log(), "the archive takes writes again") {
		t.Fatalf("the leader did not log that the archive recovered:\n%s", harness.Tail(e.leader().Log(), 10))
	}
}
