// Package backup is the file format of a Dex backup: a copy of the whole
// replicated state, taken on the leader, that a cluster can be restored from.
//
// A backup file is
//
//	DEXBACKUP 2\n                  magic and format version
//	{"index":…,"term":…,…}\n       the header, one line of JSON
//	<size bytes>                   the state snapshot (fsm.Snapshot.Persist)
//	SHA256 <64 hex digits>\n       the checksum of every byte above it
//
// so `head -2 FILE` shows what it is, and a file cut short or altered, its
// header included, fails its checksum. Format 1, still read, is the same
// but its checksum covers the state snapshot alone: an edited header went
// unseen there.
//
// Whatever the format, the cluster id in the header must be the one the
// state records in its own meta record (fsm.SnapshotMeta), so a header that
// names another cluster than its state is refused even when its checksum
// was made again to match.
package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"

	"github.com/dexhq/dex/fsm"
)

// FormatVersion is the version of the file format this build writes. It
// reads formatStateOnly too.
const FormatVersion = 2

// formatStateOnly is the first format, whose checksum covers the state
// snapshot alone.
const formatStateOnly = 1

const (
	magic         = "DEXBACKUP"
	trailerPrefix = "SHA256 "
	maxHeaderLine = 4096
)

// Header describes a backup.
type Header struct {
	// The raft index and term the snapshot was taken at.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// The cluster the backup was taken on.
	ClusterID string `json:"cluster_id"`
	// The version of the state snapshot inside (the fsm's format).
	StateVersion int `json:"state_version"`
	// The size of the state snapshot in bytes.
	Size int64 `json:"size"`
	// When it was taken, Unix milliseconds (the leader's clock).
	TakenAtMs int64 `json:"taken_at_ms"`
}

// ErrDamaged is the error of a file that is not a Dex backup or is damaged.
var ErrDamaged = errors.New("not a Dex backup, or a damaged one")

// Write writes a backup of h and the state snapshot read from payload, which
// must hold exactly h.Size bytes. It returns the checksum it wrote, of the
// header and the state.
func Write(w io.Writer, h Header, payload io.Reader) (string, error) {
	head, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriter(w)
	sum := sha256.New()
	out := io.MultiWriter(bw, sum)
	fmt.Fprintf(out, "%s %d\n%s\n", magic, FormatVersion, head)
	n, err := io.Copy(out, io.LimitReader(payload, h.Size))
	if err != nil {
		return "", err
	}
	if n != h.Size {
		return "", fmt.Errorf("the state snapshot has %d bytes, its header says %d", n, h.Size)
	}
	hexSum := hex.EncodeToString(sum.Sum(nil))
	fmt.Fprintf(bw, "%s%s\n", trailerPrefix, hexSum)
	return hexSum, bw.Flush()
}

// Verified is a backup whose checksum matched and whose header names the
// cluster its state belongs to.
type Verified struct {
	Header
	// Version is the file's format version.
	Version int
	// Checksum is the SHA-256 the file ends with, hex: of the header and
	// the state snapshot, or of the state snapshot alone in format 1.
	Checksum string
	// Payload reads the state snapshot.
	Payload *io.SectionReader
}

// Open reads the backup in r (size bytes long), checks its version, its
// checksum and that its header names the cluster its state records, and
// returns its header and a reader of its state snapshot. Every failure wraps
// ErrDamaged, except an unknown format version.
func Open(r io.ReaderAt, size int64) (*Verified, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), maxHeaderLine)
	first, err := readLine(br)
	if err != nil {
		return nil, damaged("no header: %v", err)
	}
	word, ver, ok := strings.Cut(first, " ")
	if !ok || word != magic {
		return nil, ErrDamaged
	}
	v, err := strconv.Atoi(ver)
	if err != nil {
		return nil, damaged("format version %q", ver)
	}
	if v != FormatVersion && v != formatStateOnly {
		return nil, fmt.Errorf("backup format version %d: this build reads versions %d and %d", v, formatStateOnly, FormatVersion)
	}
	line, err := readLine(br)
	if err != nil {
		return nil, damaged("no header: %v", err)
	}
	var h Header
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, damaged("header: %v", err)
	}
	start := int64(len(first) + 1 + len(line) + 1)
	trailerLen := int64(len(trailerPrefix) + 2*sha256.Size + 1)
	if h.Size < 0 || start+h.Size+trailerLen != size {
		return nil, damaged("the file has %d bytes, its header announces %d (the file was cut short or has bytes added)", size, start+h.Size+trailerLen)
	}
	trailer := make([]byte, trailerLen)
	if _, err := r.ReadAt(trailer, start+h.Size); err != nil {
		return nil, damaged("checksum: %v", err)
	}
	want, ok := strings.CutPrefix(strings.TrimSuffix(string(trailer), "\n"), trailerPrefix)
	if !ok || len(trailer) == 0 || trailer[len(trailer)-1] != '\n' {
		return nil, damaged("no checksum at the end")
	}
	sum := sha256.New()
	if v != formatStateOnly {
		fmt.Fprintf(sum, "%s\n%s\n", first, line)
	}
	got, err := checksum(io.NewSectionReader(r, start, h.Size), sum)
	if err != nil {
		return nil, damaged("read: %v", err)
	}
	stateCluster, metaErr := readClusterID(r, start, h.Size)
	if got != want {
		var which string
		if metaErr == nil && stateCluster != h.ClusterID {
			which = fmt.Sprintf("; its header says cluster %s, its state was taken on cluster %s", clusterName(h.ClusterID), clusterName(stateCluster))
		}
		return nil, damaged("checksum mismatch: %s hashes to %s, the file says %s (backup format %d; the file was altered%s)", ChecksumCovers(v), got, want, v, which)
	}
	if metaErr != nil {
		return nil, damaged("the state inside does not decode: %v", metaErr)
	}
	if stateCluster != h.ClusterID {
		return nil, damaged("its header says cluster %s but its state was taken on cluster %s (backup format %d; the header was altered)", clusterName(h.ClusterID), clusterName(stateCluster), v)
	}
	return &Verified{Header: h, Version: v, Checksum: got, Payload: io.NewSectionReader(r, start, h.Size)}, nil
}

// ChecksumCovers says what the checksum of a backup of format version v
// covers.
func ChecksumCovers(v int) string {
	if v == formatStateOnly {
		return "the state alone"
	}
	return "the header with the state"
}

// readClusterID reads the cluster id the state snapshot at off records in
// its meta record.
func readClusterID(r io.ReaderAt, off, size int64) (string, error) {
	m, err := fsm.SnapshotMeta(io.NewSectionReader(r, off, size))
	if err != nil {
		return "", err
	}
	return m.GetClusterId(), nil
}

// clusterName shows a cluster id in a message.
func clusterName(id string) string {
	if id == "" {
		return "(none)"
	}
	return id
}

func checksum(r io.Reader, h hash.Hash) (string, error) {
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readLine reads one line of at most maxHeaderLine bytes, without its "\n".
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", errors.New("header line too long")
		}
		return "", err
	}
	return string(line[:len(line)-1]), nil
}

func damaged(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDamaged, fmt.Sprintf(format, args...))
}
