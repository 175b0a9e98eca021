package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster/backup"
)

// Backups during the soak: a few taken as `dexctl snapshot save` takes
// them (the admin API's SaveSnapshot, written and verified the same way)
// while the load runs, one more once the sessions are at rest. After the
// soak each is inspected as `dexctl snapshot inspect` does (the checksum,
// then every record restored into a state machine) and restored into a
// brand-new 1-node cluster of its own, which must then serve the backup's
// sessions, and serve them again after a restart on its own data dir.

// backupsDuring is how many backups are taken while the load runs, evenly
// spread; one more is taken at the end.
const backupsDuring = 3

// backupWait bounds the tries of one backup (a fault may take the leader
// away under the first).
const backupWait = time.Minute

// Stages of a backup's check.
const (
	BackupSave    = "save"    // SaveSnapshot, written and verified
	BackupInspect = "inspect" // the checksum, then every record restored
	BackupScratch = "scratch" // the scratch cluster did not start (the harness's failure)
	BackupRestore = "restore" // RestoreSnapshot into the scratch cluster
	BackupServe   = "serve"   // the restored cluster's sessions, before and after its restart
)

// BackupCheck is one backup and what became of it.
type BackupCheck struct {
	File string `json:"file"`
	// At: when it was taken, since the soak started.
	At       time.Duration `json:"at_ns"`
	Index    uint64        `json:"index,omitempty"`
	Size     int64         `json:"size,omitempty"`
	Sessions int           `json:"sessions,omitempty"`
	// Stage that failed, and how ("" when the backup restored and served).
	Stage string `json:"stage,omitempty"`
	Err   string `json:"err,omitempty"`
	// Partitions: the backup of a cluster of several holds one of each
	// partition (Index is then partition 0's, Size and Sessions the
	// sums). Catalogs: how many partitions' catalogs and Worker
	// registrations were compared; Catalog: how they differ ("" when they
	// do not).
	Partitions []BackupPart `json:"partitions,omitempty"`
	Catalogs   int          `json:"catalogs,omitempty"`
	Catalog    string       `json:"catalog,omitempty"`
	// running: the Workers running when a backup was taken at rest, each
	// of which every partition must have registered (nil: taken during
	// the load, when a registration or the TTL's deregistration may be
	// under way, partition after partition).
	running map[string]bool
}

// BackupPart is one partition's backup in the file.
type BackupPart struct {
	Index    uint64 `json:"index"`
	Size     int64  `json:"size"`
	Sessions int    `json:"sessions"`
}

// indexes names the raft index of the backup, of each partition's with
// several.
func (b BackupCheck) indexes() string {
	if len(b.Partitions) == 0 {
		return fmt.Sprint(b.Index)
	}
	var out []string
	for k, p := range b.Partitions {
		out = append(out, fmt.Sprintf("p%d %d", k, p.Index))
	}
	return strings.Join(out, ", ")
}

// backupDue takes the next backup of the run when its moment has come.
func (s *soaker) backupDue(ctx context.Context, start time.Time) {
	n := len(s.backups)
	if n >= backupsDuring || time.Since(start) < s.o.Duration*time.Duration(n+1)/(backupsDuring+1) {
		return
	}
	s.takeBackup(ctx, start)
}

// takeFinalBackup takes the backup of the end, at rest, noting the
// Workers then running.
func (s *soaker) takeFinalBackup(ctx context.Context, start time.Time) {
	running := map[string]bool{}
	s.wmu.Lock()
	for _, w := range s.workers {
		if w != nil && w.Running() {
			running[w.Name] = true
		}
	}
	s.wmu.Unlock()
	s.takeBackup(ctx, start)
	s.backups[len(s.backups)-1].running = running
}

// takeBackup saves a backup of the cluster, trying again for backupWait.
func (s *soaker) takeBackup(ctx context.Context, start time.Time) {
	b := BackupCheck{File: filepath.Join(s.dir, "backups", fmt.Sprintf("backup-%d.dex", len(s.backups)+1)), At: time.Since(start)}
	deadline := time.Now().Add(backupWait)
	for {
		err := s.saveInto(ctx, &b)
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			b.Stage, b.Err = BackupSave, err.Error()
			break
		}
		_ = sleepCtx(ctx, time.Second)
	}
	line := fmt.Sprintf("soak: %s backup %d at index %s (%d bytes of state)", b.At.Round(time.Second), len(s.backups)+1, b.indexes(), b.Size)
	if b.Err != "" {
		line = fmt.Sprintf("soak: %s backup %d failed: %s", b.At.Round(time.Second), len(s.backups)+1, b.Err)
	}
	fmt.Fprintln(s.o.Progress, line)
	s.backups = append(s.backups, b)
}

// saveInto saves the backup b names and records its index and size.
func (s *soaker) saveInto(ctx context.Context, b *BackupCheck) error {
	if s.partitions() > 1 {
		set, err := s.saveBackupSet(ctx, b.File)
		if err != nil {
			return err
		}
		b.Index, b.Size, b.Partitions = set.Sections[0].Index, 0, nil
		for _, v := range set.Sections {
			b.Size += v.Size
			b.Partitions = append(b.Partitions, BackupPart{Index: v.Index, Size: v.Size})
		}
		return nil
	}
	v, err := s.saveBackup(ctx, b.File)
	if err != nil {
		return err
	}
	b.Index, b.Size = v.Index, v.Size
	return nil
}

// saveBackupSet saves the backup of every partition into one file as
// `dexctl snapshot save` does: each partition's from its leader, which
// any node reaches.
func (s *soaker) saveBackupSet(ctx context.Context, path string) (*backup.Set, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return backup.WriteSetFileAtomic(path, func(w io.Writer) error {
		_, err := backup.WriteSet(w, s.partitions(), func(k int, w io.Writer) error {
			stream, err := s.admin.SaveSnapshot(client.ToPartition(sctx, k), &dexv1.SaveSnapshotRequest{}, grpc.WaitForReady(true))
			if err == nil {
				err = client.ReceiveBackup(stream, w)
			}
			if err != nil {
				return fmt.Errorf("partition %d: %w", k, err)
			}
			return nil
		})
		return err
	})
}

func (s *soaker) saveBackup(ctx context.Context, path string) (*backup.Verified, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stream, err := s.admin.SaveSnapshot(sctx, &dexv1.SaveSnapshotRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return backup.WriteFileAtomic(path, func(w io.Writer) error {
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if _, err := w.Write(chunk.Data); err != nil {
				return err
			}
		}
	})
}

// checkBackups inspects and restores every backup that was saved.
func (s *soaker) checkBackups(ctx context.Context) []BackupCheck {
	for i := range s.backups {
		b := &s.backups[i]
		if b.Err != "" {
			continue
		}
		t0 := time.Now()
		b.Stage, b.Err = "", ""
		if stage, err := s.checkBackup(ctx, i+1, b); err != nil {
			b.Stage, b.Err = stage, err.Error()
		}
		what := "restored and served"
		if b.Err != "" {
			what = b.Stage + " failed: " + b.Err
		}
		if b.Catalog != "" {
			what += "; its partitions differ: " + b.Catalog
		}
		fmt.Fprintf(s.o.Progress, "soak: backup %d (index %s, %d sessions): %s in %s\n", i+1, b.indexes(), b.Sessions, what, time.Since(t0).Round(100*time.Millisecond))
	}
	return s.backups
}

// checkBackup inspects one backup, restores it into a scratch cluster and
// compares what that serves with the backup; it returns the failing stage.
func (s *soaker) checkBackup(ctx context.Context, n int, b *BackupCheck) (stage string, err error) {
	want, err := s.inspect(b)
	if err != nil {
		return BackupInspect, err
	}
	b.Sessions = len(want)
	// The scratch cluster's log stays with the soak's files when it fails.
	dir := filepath.Join(s.dir, fmt.Sprintf("scratch-%d", n))
	defer func() {
		if err == nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BackupScratch, err
	}
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: s.o.BinDir, Dir: dir, Size: 1, Args: s.scratchArgs(), Partitions: s.o.Partitions})
	if err != nil {
		return BackupScratch, err
	}
	// SIGKILL: a restored state may hold running attempts, which a SIGTERM
	// would let drain first; the restore is durable either way.
	defer c.KillAll()
	if err := c.Start(); err != nil {
		return BackupScratch, err
	}
	if err := waitReady(ctx, c); err != nil {
		return BackupScratch, err
	}
	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		return BackupScratch, err
	}
	defer conn.Close()
	restored, err := s.restore(ctx, dexv1.NewAdminServiceClient(conn), b.File)
	if err != nil {
		return BackupRestore, err
	}
	if restored != len(want) {
		return BackupRestore, fmt.Errorf("the restore reports %d sessions, the backup holds %d", restored, len(want))
	}
	if err := serves(ctx, c, conn, want); err != nil {
		return BackupServe, err
	}
	// The restored state is the scratch node's own snapshot now: it must
	// start from it.
	c.KillAll()
	if err := c.Start(); err != nil {
		return BackupServe, err
	}
	if err := serves(ctx, c, conn, want); err != nil {
		return BackupServe, fmt.Errorf("after a restart of the restored node: %w", err)
	}
	return "", nil
}

// inspect inspects backup b (inspectBackup; with several partitions
// inspectBackupSet, and compares its partitions' catalogs) and returns
// the views of its sessions.
func (s *soaker) inspect(b *BackupCheck) (map[string]sessionView, error) {
	if s.partitions() == 1 {
		return inspectBackup(b.File)
	}
	want, parts, err := inspectBackupSet(b.File, s.partitions())
	if err != nil {
		return nil, err
	}
	var cats []catalog
	for k, p := range parts {
		if k < len(b.Partitions) {
			b.Partitions[k].Sessions = p.sessions
		}
		cats = append(cats, p.catalog)
	}
	b.Catalogs = len(cats)
	b.Catalog = catalogDiffs(cats, func(worker string) bool { return b.running == nil || !b.running[worker] })
	return want, nil
}

// inspectedPart is what the inspection of one partition's backup found.
type inspectedPart struct {
	sessions int
	catalog  catalog
}

// inspectBackupSet verifies the backup of a cluster of n partitions and
// restores each partition's state as `dexctl snapshot inspect` does; it
// returns the views of every partition's sessions and what each
// partition holds.
func inspectBackupSet(path string, n int) (map[string]sessionView, []inspectedPart, error) {
	f, err := backup.OpenSetFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if f.Partitions() != n {
		return nil, nil, fmt.Errorf("the backup holds %d partitions, the cluster has %d", f.Partitions(), n)
	}
	views := map[string]sessionView{}
	var parts []inspectedPart
	for k, v := range f.Sections {
		state, err := backup.Load(v)
		if err != nil {
			return nil, nil, fmt.Errorf("partition %d's backup: %w", k, err)
		}
		vs := viewsOfState(state.State())
		maps.Copy(views, vs)
		parts = append(parts, inspectedPart{sessions: len(vs), catalog: catalogOf(state.State())})
	}
	return views, parts, nil
}

// inspectBackup verifies a backup file and restores its state as
// `dexctl snapshot inspect` does; it returns the views of its sessions.
func inspectBackup(path string) (map[string]sessionView, error) {
	f, err := backup.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	state, err := backup.Load(f.Verified)
	if err != nil {
		return nil, err
	}
	return viewsOfState(state.State()), nil
}

// restore restores the backup file through admin and returns the number
// of sessions the cluster says it restored.
func (s *soaker) restore(ctx context.Context, admin dexv1.AdminServiceClient, path string) (int, error) {
	if s.partitions() > 1 {
		return restoreBackupSet(ctx, admin, path)
	}
	resp, err := restoreBackup(ctx, admin, path)
	if err != nil {
		return 0, err
	}
	return int(resp.Sessions), nil
}

// restoreBackup sends the file to the leader as `dexctl snapshot restore
// --yes --allow-other-cluster` does.
func restoreBackup(ctx context.Context, admin dexv1.AdminServiceClient, path string) (*dexv1.RestoreSnapshotResponse, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return restoreSection(ctx, admin, 0, file)
}

// restoreBackupSet restores the backup of a cluster of several
// partitions as `dexctl snapshot restore --yes --allow-other-cluster`
// does: each partition from its own backup, partition 0 first.
func restoreBackupSet(ctx context.Context, admin dexv1.AdminServiceClient, path string) (int, error) {
	f, err := backup.OpenSetFile(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sessions := 0
	for k, sec := range f.Sections {
		resp, err := restoreSection(ctx, admin, k, io.NewSectionReader(sec.Raw, 0, sec.Raw.Size()))
		if err != nil {
			return sessions, fmt.Errorf("partition %d: %w", k, err)
		}
		sessions += int(resp.Sessions)
	}
	return sessions, nil
}

// restoreSection sends one partition's backup to partition k's leader.
func restoreSection(ctx context.Context, admin dexv1.AdminServiceClient, k int, r io.Reader) (*dexv1.RestoreSnapshotResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stream, err := admin.RestoreSnapshot(client.ToPartition(rctx, k), grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return client.SendBackup(stream, r, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
}

// serves waits until c has a ready node and compares what it serves with
// want.
func serves(ctx context.Context, c *harness.Cluster, conn *grpc.ClientConn, want map[string]sessionView) error {
	if err := waitReady(ctx, c); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	_, err := compareServed(rctx, client.New(conn), want)
	return err
}

// waitReady waits up to a minute for one ready node, naming a node that
// exited with the end of its log.
func waitReady(ctx context.Context, c *harness.Cluster) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.WaitReady(wctx); err != nil {
		for _, n := range c.Nodes {
			if !n.Running() {
				err = fmt.Errorf("%w; %s is not running (%v); its log ends:\n%s", err, n.ID, n.ExitErr(), harness.Tail(n.Log(), 8))
			}
		}
		return err
	}
	return nil
}
