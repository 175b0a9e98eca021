package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/dexhq/dex/api/archive/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func openDir(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func sampleObject(t *testing.T) []byte {
	t.Helper()
	obj, err := format.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// Put writes the object where Key says, fsyncs the file before it is
// published and the directories after, and leaves nothing else behind.
func TestFileStore_PutIsDurableAndGetReadsItBack(t *testing.T) {
	var synced []string
	oldFile, oldDir := syncFile, syncDir
	t.Cleanup(func() { syncFile, syncDir = oldFile, oldDir })
	syncFile = func(f *os.File) error { synced = append(synced, "file "+filepath.Base(f.Name())); return oldFile(f) }
	syncDir = func(d string) error { synced = append(synced, "dir "+d); return oldDir(d) }

	dir := filepath.Join(t.TempDir(), "archive") // made by Open
	s := openDir(t, dir)
	obj := sampleObject(t)
	ctx := context.Background()
	if err := s.Put(ctx, "s1", obj); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "sessions", "s1.dexsession"))
	if err != nil || !bytes.Equal(onDisk, obj) {
		t.Fatalf("the file holds %d bytes (%v); want the object's %d", len(onDisk), err, len(obj))
	}
	want := []string{"dir " + filepath.Join(dir, "sessions"), "dir " + dir}
	if len(synced) != 3 || !strings.HasPrefix(synced[0], "file s1.dexsession.") || synced[1] != want[0] || synced[2] != want[1] {
		t.Fatalf("synced %q; want the temporary file, then %q", synced, want)
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if len(files) != 1 {
		t.Fatalf("the archive holds %q; want the one object", files)
	}
	got, err := s.Get(ctx, "s1")
	if err != nil || !bytes.Equal(got, obj) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
}

// A leader that took over between the write and the delete writes the same
// object again: that succeeds and changes nothing.
func TestFileStore_APutOfTheSameKeyOverwrites(t *testing.T) {
	s := openDir(t, t.TempDir())
	ctx := context.Background()
	obj := sampleObject(t)
	for range 2 {
		if err := s.Put(ctx, "s1", obj); err != nil {
			t.Fatal(err)
		}
	}
	newer := sample()
	newer.Session.TurnsCompleted++
	obj2, err := format.Encode(newer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "s1", obj2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "s1"); err != nil || !bytes.Equal(got, obj2) {
		t.Fatalf("after an overwrite Get gives %d bytes, %v; want the newer object", len(got), err)
	}
}

func TestFileStore_MissingDamagedAndBadObjects(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	ctx := context.Background()
	if _, err := s.Get(ctx, "nobody"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "sessions/nobody.dexsession") {
		t.Fatalf("Get of a missing session: %v; want ErrNotFound naming the key", err)
	}
	obj := sampleObject(t)
	if err := s.Put(ctx, "s1", obj[:len(obj)-3]); !errors.Is(err, format.ErrDamaged) {
		t.Fatalf("Put of a truncated object: %v; want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions", "s1.dexsession")); !os.IsNotExist(err) {
		t.Fatalf("a refused object was written: %v", err)
	}
	if err := s.Put(ctx, "../escape", obj); err == nil || !strings.Contains(err.Error(), "session_id") {
		t.Fatalf("Put under a bad id: %v", err)
	}
	// A file damaged on disk is refused on the way out.
	if err := s.Put(ctx, "s1", obj); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sessions", "s1.dexsession")
	if err := os.WriteFile(path, obj[:len(obj)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "s1"); !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), "sessions/s1.dexsession") {
		t.Fatalf("Get of a truncated file: %v; want format.ErrDamaged naming the key", err)
	}
}

// A directory that cannot be written: the error says so and names the
// object. Tests run as root, whom permission bits do not stop, so the
// directory the key needs is a regular file (a write fails for root too).
func TestFileStore_AnUnwritableArchiveIsAClearError(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "sessions"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := s.Put(context.Background(), "s1", sampleObject(t))
	if err == nil || !strings.Contains(err.Error(), "write sessions/s1.dexsession to the archive file://"+dir) || !strings.Contains(err.Error(), "the archive is not writable") {
		t.Fatalf("Put into an unwritable archive: %v", err)
	}
}

func TestFileStore_AReadOnlyDirectoryIsAClearError(t *testing.T) {
	dir := t.TempDir()
	s := openDir(t, dir)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	if f, err := os.Create(filepath.Join(dir, "probe")); err == nil {
		f.Close()
		t.Skip("permission bits do not stop this user (root): TestFileStore_AnUnwritableArchiveIsAClearError covers the failure")
	}
	err := s.Put(context.Background(), "s1", sampleObject(t))
	if err == nil || !strings.Contains(err.Error(), "the archive is not writable") {
		t.Fatalf("Put into a read-only directory: %v", err)
	}
}

func TestWriteProblem_NamesAFullArchive(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/a/sessions/s1.dexsession.1.tmp", Err: syscall.ENOSPC}
	if got := writeProblem(fmt.Errorf("wrapped: %w", full)); got != "the archive is full" {
		t.Fatalf("ENOSPC: %q", got)
	}
	if got := writeProblem(&fs.PathError{Op: "open", Err: syscall.EROFS}); got != "the archive is not writable" {
		t.Fatalf("EROFS: %q", got)
	}
}

func TestOpen_RefusesABadURLWithAClearError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"":                           "no archive URL",
		"ftp://host/dir":             "the scheme must be one of file://, s3://, gs://, azblob://",
		"archive":                    "the scheme must be one of",
		"file://relative/dir":        "names a local directory, file:///DIR",
		"file:///tmp/a?create_dir=1": "takes no query parameters",
		"s3://":                      "names no bucket",
		"file://" + file + "/sub":    "open the archive file://" + file + "/sub",
		"file://" + file:             "is not a directory",
		"%zz":                        "invalid URL escape",
	}
	for url, want := range cases {
		s, err := Open(context.Background(), url)
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v; want an error containing %q", url, err, want)
		}
	}
	// A bare absolute path is a directory.
	dir := t.TempDir()
	s, err := Open(context.Background(), dir)
	if err != nil || s.URL() != "file://"+dir {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	s.Close()
}
