package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
}

// backupDue takes the next backup of the run when its moment has come.
func (s *soaker) backupDue(ctx context.Context, start time.Time) {
	n := len(s.backups)
	if n >= backupsDuring || time.Since(start) < s.o.Duration*time.Duration(n+1)/(backupsDuring+1) {
		return
	}
	s.takeBackup(ctx, start)
}

// takeBackup saves a backup of the cluster, trying again for backupWait.
func (s *soaker) takeBackup(ctx context.Context, start time.Time) {
	b := BackupCheck{File: filepath.Join(s.dir, "backups", fmt.Sprintf("backup-%d.dex", len(s.backups)+1)), At: time.Since(start)}
	deadline := time.Now().Add(backupWait)
	for {
		v, err := s.saveBackup(ctx, b.File)
		if err == nil {
			b.Index, b.Size = v.Index, v.Size
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			b.Stage, b.Err = BackupSave, err.Error()
			break
		}
		_ = sleepCtx(ctx, time.Second)
	}
	line := fmt.Sprintf("soak: %s backup %d at index %d (%d bytes of state)", b.At.Round(time.Second), len(s.backups)+1, b.Index, b.Size)
	if b.Err != "" {
		line = fmt.Sprintf("soak: %s backup %d failed: %s", b.At.Round(time.Second), len(s.backups)+1, b.Err)
	}
	fmt.Fprintln(s.o.Progress, line)
	s.backups = append(s.backups, b)
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
		fmt.Fprintf(s.o.Progress, "soak: backup %d (index %d, %d sessions): %s in %s\n", i+1, b.Index, b.Sessions, what, time.Since(t0).Round(100*time.Millisecond))
	}
	return s.backups
}

// checkBackup inspects one backup, restores it into a scratch cluster and
// compares what that serves with the backup; it returns the failing stage.
func (s *soaker) checkBackup(ctx context.Context, n int, b *BackupCheck) (stage string, err error) {
	want, err := inspectBackup(b.File)
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
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: s.o.BinDir, Dir: dir, Size: 1, Args: s.scratchArgs()})
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
	resp, err := restoreBackup(ctx, dexv1.NewAdminServiceClient(conn), b.File)
	if err != nil {
		return BackupRestore, err
	}
	if int(resp.Sessions) != len(want) {
		return BackupRestore, fmt.Errorf("the restore reports %d sessions, the backup holds %d", resp.Sessions, len(want))
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

// restoreBackup sends the file to the leader as `dexctl snapshot restore
// --yes --allow-other-cluster` does.
func restoreBackup(ctx context.Context, admin dexv1.AdminServiceClient, path string) (*dexv1.RestoreSnapshotResponse, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stream, err := admin.RestoreSnapshot(rctx, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	return client.SendBackup(stream, file, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
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
