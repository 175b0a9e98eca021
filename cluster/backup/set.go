package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// The backup of a cluster of several partitions (docs/design/partitions.md)
// is one file that holds a backup of each partition:
//
//	DEXBACKUP 3\n                  magic and format version
//	{"partitions":N}\n             the header: how many partitions it holds
//	<partition 0's backup>         a backup of format 2 (header, state,
//	…                              checksum) whose header names partition
//	<partition N-1's backup>       k of N, in partition order
//	SHA256 <64 hex digits>\n       the checksum of every byte above it
//
// Each partition's backup is whole, so it is sent to its partition as it
// is, and each is consistent on its own: nothing spans partitions but the
// tool catalog, which every partition's state holds. Every partition's
// backup names the same cluster.

// FormatPartitions is the version of a file that holds a backup of each
// partition of a cluster of several.
const FormatPartitions = 3

// setHeader is the header line of a file of format 3.
type setHeader struct {
	Partitions int `json:"partitions"`
}

// Set is a verified backup file of a whole cluster: the backup of its one
// partition (format 1 or 2), or of each of its partitions (format 3).
type Set struct {
	// Version is the file's format version.
	Version int
	// Checksum is the SHA-256 the file ends with, hex.
	Checksum string
	// Sections are the partitions' backups: partition k's is Sections[k].
	Sections []*Verified
}

// Partitions is the number of partitions of the cluster the file is a
// backup of.
func (s *Set) Partitions() int { return len(s.Sections) }

// ClusterID is the cluster the backup was taken on.
func (s *Set) ClusterID() string { return s.Sections[0].ClusterID }

// WriteSet writes the backup of a cluster of n partitions (n > 1): its
// header, then partition k's backup as section(k, w) writes it, for k = 0
// to n-1, then the checksum, which it returns. OpenSet verifies what was
// written.
func WriteSet(w io.Writer, n int, section func(k int, w io.Writer) error) (string, error) {
	if n < 2 {
		return "", fmt.Errorf("a backup of %d partitions: the backup of a cluster of one partition is of format %d", n, FormatVersion)
	}
	head, err := json.Marshal(setHeader{Partitions: n})
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriter(w)
	sum := sha256.New()
	out := io.MultiWriter(bw, sum)
	fmt.Fprintf(out, "%s %d\n%s\n", magic, FormatPartitions, head)
	for k := range n {
		if err := section(k, out); err != nil {
			return "", err
		}
	}
	hexSum := hex.EncodeToString(sum.Sum(nil))
	fmt.Fprintf(bw, "%s%s\n", trailerPrefix, hexSum)
	return hexSum, bw.Flush()
}

// OpenSet reads the backup file in r (size bytes long) of any format and
// verifies it: its checksum, then each partition's backup as Open does,
// that each names its place (partition k of the file's number) and that
// all name one cluster. A file of format 1 or 2 must be the backup of a
// cluster of one partition. Every failure wraps ErrDamaged, except an
// unknown format version and a lone backup of one partition of several.
func OpenSet(r io.ReaderAt, size int64) (*Set, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), maxHeaderLine)
	first, v, err := readVersion(br)
	if err != nil {
		return nil, err
	}
	if v != FormatPartitions {
		b, err := Open(r, size)
		if err != nil {
			return nil, err
		}
		if n := b.PartitionCount(); n != 1 {
			return nil, fmt.Errorf("the file is the backup of partition %d alone, of a cluster of %d partitions: that cluster's backup holds every partition's (dexctl snapshot save writes it)", b.Partition, n)
		}
		return &Set{Version: b.Version, Checksum: b.Checksum, Sections: []*Verified{b}}, nil
	}
	h, err := readSetHeader(br)
	if err != nil {
		return nil, err
	}
	if h.Partitions < 2 {
		return nil, damaged("its header says %d partitions (backup format %d holds 2 or more)", h.Partitions, v)
	}
	start, end := int64(len(first)+1)+h.line, size-trailerLen
	if end < start {
		return nil, damaged("the file has %d bytes, too few for its header and checksum (the file was cut short)", size)
	}
	want, err := readTrailer(r, end)
	if err != nil {
		return nil, err
	}
	got, err := checksum(io.NewSectionReader(r, 0, end), sha256.New())
	if err != nil {
		return nil, damaged("read: %v", err)
	}
	if got != want {
		return nil, damaged("checksum mismatch: the file hashes to %s, it says %s (backup format %d; the file was altered, cut short or has bytes added)", got, want, v)
	}
	set := &Set{Version: v, Checksum: got}
	off := start
	for k := range h.Partitions {
		n, err := sectionLen(r, off, end)
		if err != nil {
			return nil, damaged("partition %d's backup: %v", k, err)
		}
		b, err := Open(io.NewSectionReader(r, off, n), n)
		if err != nil {
			return nil, fmt.Errorf("partition %d's backup: %w", k, err)
		}
		if err := set.checkSection(k, h.Partitions, b); err != nil {
			return nil, err
		}
		set.Sections = append(set.Sections, b)
		off += n
	}
	if off != end {
		return nil, damaged("%d bytes follow the backup of the last partition, %d", end-off, h.Partitions-1)
	}
	return set, nil
}

// checkSection checks that b, the k-th backup of a file of n, is
// partition k's of n, of format 2 and of the cluster of the ones before.
func (s *Set) checkSection(k, n int, b *Verified) error {
	switch {
	case b.Version != FormatVersion:
		return damaged("partition %d's backup is of format %d, not %d", k, b.Version, FormatVersion)
	case b.Partition != k || b.PartitionCount() != n:
		return damaged("the backup in partition %d's place of %d is partition %d's of %d", k, n, b.Partition, b.PartitionCount())
	case k > 0 && b.ClusterID != s.ClusterID():
		return damaged("partition %d's backup was taken on cluster %s, partition 0's on cluster %s", k, clusterName(b.ClusterID), clusterName(s.ClusterID()))
	}
	return nil
}

// setHeaderLine is a format 3 header and the length of its line, "\n"
// included.
type setHeaderLine struct {
	setHeader
	line int64
}

// readSetHeader reads the header line of a file of format 3.
func readSetHeader(br *bufio.Reader) (setHeaderLine, error) {
	line, err := readLine(br)
	if err != nil {
		return setHeaderLine{}, damaged("no header: %v", err)
	}
	var h setHeader
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return setHeaderLine{}, damaged("header: %v", err)
	}
	return setHeaderLine{h, int64(len(line) + 1)}, nil
}

// sectionLen is the length of the backup at off, from its header, which
// must end by end.
func sectionLen(r io.ReaderAt, off, end int64) (int64, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, off, end-off), maxHeaderLine)
	first, err := readLine(br)
	if err != nil {
		return 0, fmt.Errorf("no header: %v", err)
	}
	line, err := readLine(br)
	if err != nil {
		return 0, fmt.Errorf("no header: %v", err)
	}
	var h struct {
		Size int64 `json:"size"`
	}
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		return 0, fmt.Errorf("header: %v", err)
	}
	n := int64(len(first)+1+len(line)+1) + h.Size + trailerLen
	if h.Size < 0 || n > end-off {
		return 0, fmt.Errorf("its header announces %d bytes, the file holds %d after it", n, end-off)
	}
	return n, nil
}
