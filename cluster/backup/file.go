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
	f := &File{}
	err := openVerified(path, &f.f, func(r io.ReaderAt, size int64) (err error) {
		f.Verified, err = Open(r, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// SetFile is a verified backup file of a whole cluster open for reading.
type SetFile struct {
	*Set
	f *os.File
}

// Close closes the file.
func (f *SetFile) Close() error { return f.f.Close() }

// OpenSetFile opens the backup file of a whole cluster at path and
// verifies it (OpenSet).
func OpenSetFile(path string) (*SetFile, error) {
	f := &SetFile{}
	err := openVerified(path, &f.f, func(r io.ReaderAt, size int64) (err error) {
		f.Set, err = OpenSet(r, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// openVerified opens path into *f and verifies it with verify; on failure
// it closes it again.
func openVerified(path string, f **os.File, verify func(r io.ReaderAt, size int64) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	fi, err := file.Stat()
	if err == nil {
		err = verify(file, fi.Size())
	}
	if err != nil {
		file.Close()
		return err
	}
	*f = file
	return nil
}

// WriteFileAtomic writes a backup to path through fill: first to a temporary
// file next to it, which is synced and verified (Open), then renamed over
// path and the directory synced. A failure leaves path as it was.
func WriteFileAtomic(path string, fill func(w io.Writer) error) (*Verified, error) {
	var v *Verified
	err := writeAtomic(path, fill, func(r io.ReaderAt, size int64) (err error) {
		v, err = Open(r, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	v.Payload, v.Raw = nil, nil // the temporary file is closed
	return v, nil
}

// WriteSetFileAtomic writes the backup file of a whole cluster to path as
// WriteFileAtomic does, verified by OpenSet.
func WriteSetFileAtomic(path string, fill func(w io.Writer) error) (*Set, error) {
	var s *Set
	err := writeAtomic(path, fill, func(r io.ReaderAt, size int64) (err error) {
		s, err = OpenSet(r, size)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, v := range s.Sections {
		v.Payload, v.Raw = nil, nil // the temporary file is closed
	}
	return s, nil
}

// writeAtomic writes path through fill via a temporary file next to it,
// synced and checked by verify before the rename.
func writeAtomic(path string, fill func(w io.Writer) error, verify func(r io.ReaderAt, size int64) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	fi, err := tmp.Stat()
	if err != nil {
		return err
	}
	if err := verify(tmp, fi.Size()); err != nil {
		return fmt.Errorf("the backup received does not verify: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
