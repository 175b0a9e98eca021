package backup

import (
	"fmt"
	"io"

	"github.com/dexhq/dex/fsm"
)

// Summary is what a backup holds.
type Summary struct {
	Header
	FormatVersion int    `json:"format_version"`
	Checksum      string `json:"sha256"`
	// The dispatch epoch and the applied index recorded in the state.
	Epoch        uint64     `json:"epoch"`
	AppliedIndex uint64     `json:"applied_index"`
	Counts       fsm.Counts `json:"counts"`
}

// Inspect restores the backup's state into a state machine of its own (so
// every record decodes) and counts its tables.
func Inspect(v *Verified) (*Summary, error) {
	f, err := Load(v)
	if err != nil {
		return nil, err
	}
	st := f.State()
	m := st.Meta()
	return &Summary{
		Header:        v.Header,
		FormatVersion: v.Version,
		Checksum:      v.Checksum,
		Epoch:         m.GetEpoch(),
		AppliedIndex:  m.GetAppliedIndex(),
		Counts:        st.Counts(),
	}, nil
}

// Load restores the backup's state into a new state machine.
func Load(v *Verified) (*fsm.FSM, error) {
	f := fsm.New(fsm.Options{})
	if err := f.Restore(io.NewSectionReader(v.Payload, 0, v.Size)); err != nil {
		return nil, fmt.Errorf("%w: the state inside does not restore: %v", ErrDamaged, err)
	}
	return f, nil
}

// SetSummary is what the backup file of a whole cluster holds.
type SetSummary struct {
	FormatVersion int    `json:"format_version"`
	Checksum      string `json:"sha256"`
	Partitions    int    `json:"partitions"`
	ClusterID     string `json:"cluster_id"`
	// Sections summarise each partition's backup, partition 0 first.
	Sections []SectionSummary `json:"sections"`
}

// SectionSummary is what one partition's backup holds.
type SectionSummary struct {
	Partition int `json:"partition"`
	*Summary
}

// InspectSet inspects each partition's backup in s.
func InspectSet(s *Set) (*SetSummary, error) {
	out := &SetSummary{FormatVersion: s.Version, Checksum: s.Checksum, Partitions: s.Partitions(), ClusterID: s.ClusterID()}
	for k, v := range s.Sections {
		sum, err := Inspect(v)
		if err != nil {
			return nil, fmt.Errorf("partition %d's backup: %w", k, err)
		}
		out.Sections = append(out.Sections, SectionSummary{Partition: k, Summary: sum})
	}
	return out, nil
}
