package fsm

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Bounds of a session's labels (docs/labels.md). They bound the keys each
// session has in the list indexes (store.IndexListCreated/Updated) too.
const (
	MaxLabels          = 32
	MaxLabelKeyBytes   = 63
	MaxLabelValueBytes = 256
)

// CheckLabelKey refuses a key that is empty, longer than MaxLabelKeyBytes,
// or has a byte outside [a-z0-9._/-], or does not begin with [a-z0-9].
func CheckLabelKey(key string) *Rejection {
	if key == "" {
		return reject(CodeInvalid, "a label key is empty")
	}
	if len(key) > MaxLabelKeyBytes {
		return reject(CodeInvalid, "label key %q is longer than %d bytes", clip(key, 80), MaxLabelKeyBytes)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._/-", rune(c))) {
			return reject(CodeInvalid, "label key %q: only a-z, 0-9 and \"._/-\" are allowed, beginning with a letter or digit", key)
		}
	}
	return nil
}

// CheckLabelValue refuses a value longer than MaxLabelValueBytes, or one
// that is not UTF-8 or holds a control character. An empty value is a
// label too.
func CheckLabelValue(key, value string) *Rejection {
	if len(value) > MaxLabelValueBytes {
		return reject(CodeInvalid, "the value of label %q is longer than %d bytes", key, MaxLabelValueBytes)
	}
	if !utf8.ValidString(value) {
		return reject(CodeInvalid, "the value of label %q is not UTF-8", key)
	}
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		return reject(CodeInvalid, "the value of label %q holds a control character", key)
	}
	return nil
}

// CheckLabels refuses a list of labels with a bad key or value, a key
// given twice, or more than MaxLabels.
func CheckLabels(labels []*fsmpb.Label) *Rejection {
	if len(labels) > MaxLabels {
		return reject(CodeInvalid, "%d labels given; a session holds at most %d", len(labels), MaxLabels)
	}
	for i, l := range labels {
		if r := CheckLabelKey(l.GetKey()); r != nil {
			return r
		}
		if r := CheckLabelValue(l.GetKey(), l.GetValue()); r != nil {
			return r
		}
		for _, o := range labels[:i] {
			if o.GetKey() == l.GetKey() {
				return reject(CodeInvalid, "label %q is given twice", l.GetKey())
			}
		}
	}
	return nil
}

// withLabels is labels with remove's keys dropped and set's labels put,
// sorted by key (the stored order, so equal states encode equally), or a
// rejection when the input is bad or the result holds too many.
func withLabels(labels []*fsmpb.Label, set []*fsmpb.Label, remove []string) ([]*fsmpb.Label, *Rejection) {
	if len(set) > MaxLabels || len(remove) > MaxLabels {
		return nil, reject(CodeInvalid, "at most %d labels are set or removed at once", MaxLabels)
	}
	if r := CheckLabels(set); r != nil {
		return nil, r
	}
	for _, k := range remove {
		if r := CheckLabelKey(k); r != nil {
			return nil, r
		}
		for _, l := range set {
			if l.Key == k {
				return nil, reject(CodeInvalid, "label %q is both set and removed", k)
			}
		}
	}
	out := make([]*fsmpb.Label, 0, len(labels)+len(set))
	for _, l := range labels {
		if !slices.Contains(remove, l.Key) && !slices.ContainsFunc(set, func(s *fsmpb.Label) bool { return s.Key == l.Key }) {
			out = append(out, l)
		}
	}
	for _, l := range set {
		out = append(out, &fsmpb.Label{Key: l.Key, Value: l.Value})
	}
	if len(out) > MaxLabels {
		return nil, reject(CodeInvalid, "the session would hold %d labels; at most %d", len(out), MaxLabels)
	}
	slices.SortFunc(out, func(a, b *fsmpb.Label) int { return strings.Compare(a.Key, b.Key) })
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// setLabels applies a SetLabels: bad input changes nothing.
func (a *applier) setLabels(c *fsmpb.SetLabels) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if len(c.Set) == 0 && len(c.Remove) == 0 {
		return rejected(reject(CodeInvalid, "the label change sets and removes nothing"))
	}
	labels, r := withLabels(s.Labels, c.Set, c.Remove)
	if r != nil {
		return rejected(r)
	}
	s.Labels = labels
	a.emit(s.Id, "labels_changed", "", labelsText(labels))
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// labelsText is labels as k=v,k=v (an event's detail).
func labelsText(labels []*fsmpb.Label) string {
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = l.Key + "=" + l.Value
	}
	return strings.Join(parts, ",")
}
