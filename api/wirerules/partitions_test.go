package wirerules

import "testing"

// The placement is FNV-1a of the id's bytes: these values are what any
// library, in any language, must compute for the same ids.
func TestPartitionOfIsFNV1aOfTheID(t *testing.T) {
	for _, c := range []struct {
		id         string
		partitions int
		want       int
	}{
		{"a", 3, 0xe40c292c % 3},
		{"ses-0123456789abcdef", 1, 0},
		{"ses-0123456789abcdef", 0, 0},
		{"", 7, 0x811c9dc5 % 7},
		{"foobar", 64, 0xbf9cf968 % 64},
	} {
		if got := PartitionOf(c.id, c.partitions); got != c.want {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", c.id, c.partitions, got, c.want)
		}
	}
}

func TestNewSessionIDInDrawsAnIDOfThatPartition(t *testing.T) {
	seen := map[int]bool{}
	for k := range 5 {
		for range 20 {
			id := NewSessionIDIn(k, 5)
			if err := CheckID("session id", id); err != nil {
				t.Fatal(err)
			}
			if got := PartitionOf(id, 5); got != k {
				t.Fatalf("NewSessionIDIn(%d, 5) = %q, which lives in partition %d", k, id, got)
			}
			seen[k] = true
		}
	}
	if len(seen) != 5 {
		t.Fatalf("partitions drawn: %v", seen)
	}
}
