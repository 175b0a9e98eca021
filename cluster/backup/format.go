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
//
// A cluster of several partitions has a backup of each partition, all in
// one file of format 3 (set.go). Each is a backup of format 2 whose header
// names its partition and the cluster's number of partitions. Only
// partition 0's state records the cluster id: the header of another
// partition's backup names the cluster it was taken on, and its state must
// record none.
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
	// trailerLen is the length of the checksum line a file ends with.
	trailerLen = int64(len(trailerPrefix) + 2*sha256.Size + 1)
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
	// The partition the state is of, of Partitions: both absent in the
	// backup of a cluster of one partition, which is partition 0 of 1.
	Partition  int `json:"partition,omitempty"`
	Partitions int `json:"partitions,omitempty"`
}

// PartitionCount is the number of partitions of the cluster the backup
// was taken on.
func (h Header) PartitionCount() int { return max(h.Partitions, 1) }

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
	// Raw reads the whole backup, as it is sent to a cluster.
	Raw *io.SectionReader
}

// Open reads the backup in r (size bytes long), checks its version, its
// checksum and that its header names the cluster its state records, and
// returns its header and a reader of its state snapshot. Every failure wraps
// ErrDamaged, except an unknown format version and a file of format 3,
// which holds several backups (OpenSet reads it).
func Open(r io.ReaderAt, size int64) (*Verified, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), maxHeaderLine)
	first, v, err := readVersion(br)
	if err != nil {
		return nil, err
	}
	if v == FormatPartitions {
		n := "several"
		if h, err := readSetHeader(br); err == nil {
			n = strconv.Itoa(h.Partitions)
		}
		return nil, fmt.Errorf("the file holds a backup of each of the %s partitions of a cluster (backup format %d), not the backup of one", n, v)
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
	if h.Size < 0 || start+h.Size+trailerLen != size {
		return nil, damaged("the file has %d bytes, its header announces %d (the file was cut short or has bytes added)", size, start+h.Size+trailerLen)
	}
	want, err := readTrailer(r, start+h.Size)
	if err != nil {
		return nil, err
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
		if metaErr == nil && h.Partition == 0 && stateCluster != h.ClusterID {
			which = fmt.Sprintf("; its header says cluster %s, its state was taken on cluster %s", clusterName(h.ClusterID), clusterName(stateCluster))
		}
		return nil, damaged("checksum mismatch: %s hashes to %s, the file says %s (backup format %d; the file was altered%s)", ChecksumCovers(v), got, want, v, which)
	}
	if metaErr != nil {
		return nil, damaged("the state inside does not decode: %v", metaErr)
	}
	switch {
	case h.Partition < 0 || h.Partitions < 0 || h.Partition >= h.PartitionCount():
		return nil, damaged("its header names partition %d of %d", h.Partition, h.PartitionCount())
	case h.Partition > 0 && stateCluster != "":
		return nil, damaged("its header says partition %d but its state records cluster %s, as only partition 0's does (backup format %d; the header was altered)", h.Partition, stateCluster, v)
	case h.Partition == 0 && stateCluster != h.ClusterID:
		return nil, damaged("its header says cluster %s but its state was taken on cluster %s (backup format %d; the header was altered)", clusterName(h.ClusterID), clusterName(stateCluster), v)
	}
	return &Verified{Header: h, Version: v, Checksum: got, Payload: io.NewSectionReader(r, start, h.Size), Raw: io.NewSectionReader(r, 0, size)}, nil
}

// readVersion reads a backup's first line: its magic and format version,
// one this build reads.
func readVersion(br *bufio.Reader) (first string, v int, err error) {
	first, err = readLine(br)
	if err != nil {
		return "", 0, damaged("no header: %v", err)
	}
	word, ver, ok := strings.Cut(first, " ")
	if !ok || word != magic {
		return "", 0, ErrDamaged
	}
	v, err = strconv.Atoi(ver)
	if err != nil {
		return "", 0, damaged("format version %q", ver)
	}
	if v != formatStateOnly && v != FormatVersion && v != FormatPartitions {
		return "", 0, fmt.Errorf("backup format version %d: this build reads versions %d to %d", v, formatStateOnly, FormatPartitions)
	}
	return first, v, nil
}

// readTrailer reads the checksum line at off: the checksum, hex.
func readTrailer(r io.ReaderAt, off int64) (string, error) {
	trailer := make([]byte, trailerLen)
	if _, err := r.ReadAt(trailer, off); err != nil {
		return "", damaged("checksum: %v", err)
	}
	want, ok := strings.CutPrefix(strings.TrimSuffix(string(trailer), "\n"), trailerPrefix)
	if !ok || trailer[len(trailer)-1] != '\n' {
		return "", damaged("no checksum at the end")
	}
	return want, nil
}

// ChecksumCovers says what the checksum of a backup of format version v
// covers.
func ChecksumCovers(v int) string {
	switch v {
	case formatStateOnly:
		return "the state alone"
	case FormatPartitions:
		return "the whole file, every partition's backup in it"
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
