package wirerules

import "hash/fnv"

// PartitionOf is the partition a root session of this id lives in, in a
// cluster of the given number of partitions: FNV-1a (32 bits) of the id's
// bytes, modulo the count. It is stable across builds and languages, so
// any library can compute it. A child session lives in its parent's
// partition instead (docs/design/partitions.md).
func PartitionOf(sessionID string, partitions int) int {
	if partitions <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(sessionID))
	return int(h.Sum32() % uint32(partitions))
}

// NewSessionIDIn returns a new random session id that lives in partition
// k of partitions: ids are drawn until one hashes there, which takes
// `partitions` draws on average.
func NewSessionIDIn(k, partitions int) string {
	for {
		if id := NewSessionID(); PartitionOf(id, partitions) == k {
			return id
		}
	}
}
