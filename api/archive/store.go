package archive

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"github.com/dexhq/dex/api/archive/format"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob://
	"gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob" // gs://
	_ "gocloud.dev/blob/s3blob"  // s3://
	"gocloud.dev/gcerrors"

	"github.com/dexhq/dex/api/wirerules"
)

// ContentType is the media type archived sessions are stored with.
const ContentType = "application/vnd.dex.session-archive"

// Schemes are the archive URL schemes Open takes.
var Schemes = []string{"file", "s3", "gs", "azblob"}

// Store is an archive of sessions in a bucket.
type Store struct {
	bucket *blob.Bucket
	url    string
	// dir is the directory of a file:// archive ("" for a cloud bucket):
	// Put fsyncs what it writes there.
	dir string
}

// Key is the object key of session id's archived form.
func Key(id string) string { return "sessions/" + id + ".dexsession" }

// Open opens the archive at rawURL: file:///DIR (a bare absolute path is
// taken as one; the directory is created if missing), s3://BUCKET,
// gs://BUCKET or azblob://CONTAINER with their drivers' query parameters
// and credentials from the environment, as gocloud.dev/blob reads them.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	s := &Store{url: u.String()}
	if u.Scheme == "file" {
		s.dir = filepath.Clean(u.Path)
		// The temporary file sits beside the object, so the rename that
		// publishes it stays in one directory (and one file system); no
		// sidecar file of attributes is written.
		s.bucket, err = fileblob.OpenBucket(s.dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	} else {
		s.bucket, err = blob.OpenBucket(ctx, s.url)
	}
	if err != nil {
		return nil, fmt.Errorf("open the archive %s: %w", s.url, err)
	}
	return s, nil
}

// parseURL checks an archive URL: one of Schemes, and for file:// an
// absolute directory without query parameters.
func parseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, errors.New("no archive URL: give file:///DIR, s3://BUCKET, gs://BUCKET or azblob://CONTAINER")
	}
	if strings.HasPrefix(rawURL, "/") {
		rawURL = (&url.URL{Scheme: "file", Path: rawURL}).String()
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("archive URL %q: %v", rawURL, err)
	}
	known := false
	for _, s := range Schemes {
		known = known || u.Scheme == s
	}
	if !known {
		return nil, fmt.Errorf("archive URL %q: the scheme must be one of %s:// (a bare absolute path is a file:// directory)", rawURL, strings.Join(Schemes, "://, "))
	}
	if u.Scheme != "file" {
		if u.Host == "" {
			return nil, fmt.Errorf("archive URL %q names no bucket", rawURL)
		}
		return u, nil
	}
	switch {
	case u.Host != "" && u.Host != "localhost":
		return nil, fmt.Errorf("archive URL %q: a file:// URL names a local directory, file:///DIR (three slashes), not a host", rawURL)
	case u.Path == "" || !filepath.IsAbs(u.Path):
		return nil, fmt.Errorf("archive URL %q: a file:// URL needs an absolute directory, file:///DIR", rawURL)
	case u.RawQuery != "":
		return nil, fmt.Errorf("archive URL %q: a file:// archive takes no query parameters", rawURL)
	}
	return &url.URL{Scheme: "file", Path: filepath.Clean(u.Path)}, nil
}

// URL is the archive's URL.
func (s *Store) URL() string { return s.url }

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Put writes obj, the archived form of session id, under Key(id), replacing
// what is there. It returns once the object is durable: the bucket
// acknowledged it, and on file:// the data and the directory entry are
// fsynced. A damaged obj is refused before anything is written.
func (s *Store) Put(ctx context.Context, id string, obj []byte) error {
	if err := wirerules.CheckID("session_id", id); err != nil {
		return fmt.Errorf("archive %s: %w", s.url, err)
	}
	if err := format.Verify(obj); err != nil {
		return fmt.Errorf("archive session %s: %w", id, err)
	}
	key := Key(id)
	if err := s.put(ctx, key, obj); err != nil {
		return fmt.Errorf("write %s to the archive %s: %s: %w", key, s.url, writeProblem(err), err)
	}
	return nil
}

func (s *Store) put(ctx context.Context, key string, obj []byte) error {
	sum := md5.Sum(obj)
	var file *os.File
	w, err := s.bucket.NewWriter(ctx, key, &blob.WriterOptions{
		ContentType: ContentType,
		ContentMD5:  sum[:],
		BeforeWrite: func(as func(any) bool) error {
			as(&file) // only file:// has one
			return nil
		},
	})
	if err != nil {
		return err
	}
	if _, err := w.Write(obj); err != nil {
		_ = w.Close()
		return err
	}
	if file != nil {
		// fileblob renames its temporary file into place on Close without
		// an fsync: the data goes to disk first.
		if err := syncFile(file); err != nil {
			_ = w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if s.dir == "" {
		return nil
	}
	// The rename, and the key's directory if it was just made.
	keyDir := filepath.Join(s.dir, filepath.FromSlash(filepath.Dir(key)))
	if err := syncDir(keyDir); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// syncFile and syncDir are variables so a test sees the durability path.
var (
	syncFile = func(f *os.File) error { return f.Sync() }
	syncDir  = func(dir string) error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
)

// writeProblem names, for an operator, what stops a write.
func writeProblem(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "the archive is full"
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTDIR),
		gcerrors.Code(err) == gcerrors.PermissionDenied:
		return "the archive is not writable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the write was cut short"
	}
	return "the write failed"
}

// Get reads session id's archived form and verifies it; ErrNotFound when
// the archive has none.
func (s *Store) Get(ctx context.Context, id string) ([]byte, error) {
	if err := wirerules.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("archive %s: %w", s.url, err)
	}
	key := Key(id)
	obj, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, notFound(fmt.Sprintf("session %q is not in the archive %s (no %s)", id, s.url, key))
	}
	if err != nil {
		return nil, fmt.Errorf("read %s from the archive %s: %w", key, s.url, err)
	}
	if err := format.Verify(obj); err != nil {
		return nil, fmt.Errorf("%s in the archive %s: %w", key, s.url, err)
	}
	return obj, nil
}
