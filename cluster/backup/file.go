package backup

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is a verified backup file open for reading.
type File struct {
	*Verified
	f *os.File
}

// Close closes the file.
func (f *File) Close() error { return f.f.Close() }

// OpenFile opens the backup at path and verifies it (Open).
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	v, err := Open(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{Verified: v, f: f}, nil
}

// WriteFileAtomic writes a backup to path through fill: first to a temporary
// file next to it, which is synced and verified, then renamed over path and
// the directory synced. A failure leaves path as it was.
func WriteFileAtomic(path string, fill func(w io.Writer) error) (*Verified, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := fill(tmp); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return nil, err
	}
	v, err := Open(tmp, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("the backup received does not verify: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return nil, err
		}
	}
	v.Payload = nil // the temporary file is closed
	return v, nil
}
