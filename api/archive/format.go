package archive

import (
	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The format of an object lives in api/archive/format, which the server
// imports without the stores; these are its names as this package always
// had them.
const (
	Version = format.Version
	Magic   = format.Magic
)

// ErrDamaged is wrapped by every error of Decode about the object's bytes.
var ErrDamaged = format.ErrDamaged

// Encode returns the archived form of a whole session.
func Encode(s *dexv1.ArchivedSession) ([]byte, error) { return format.Encode(s) }

// Decode verifies an archived session and returns it whole.
func Decode(obj []byte) (*dexv1.ArchivedSession, error) { return format.Decode(obj) }

// Verify checks an object's magic line, version and checksum without
// decoding its records.
func Verify(obj []byte) error { return format.Verify(obj) }
