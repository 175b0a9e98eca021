// Package format is the bytes of an archived Dex session (docs/archive.md):
// Encode, Decode and Verify, and the Encoder that writes a session record
// by record. It depends on the wire types only, so the server that imports
// a session and the tools that write one share it without the stores.
package format

import (
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Magic is the first line of every archived session; its number is the
// format version.
const (
	magicPrefix = "dex-session-archive "
	Version     = 1
	Magic       = magicPrefix + "1\n"
)

// sumSize is the size of the SHA-256 trailer.
const sumSize = sha256.Size

// maxRecord bounds one record when decoding: a Step or history entry is at
// most the cluster's largest row, far below this.
const maxRecord = 256 << 20

// ErrDamaged is wrapped by every error of Decode about the object's bytes:
// a checksum that does not match, a truncated object, a foreign file.
var ErrDamaged = errors.New("damaged archived session")

// Encoder writes the records of one session, counting them: Header once,
// then History, Step and Event in the archive's order, then Finish.
type Encoder struct {
	out   *bytes.Buffer
	flate *flate.Writer
	end   dexv1.ArchiveEnd
	err   error
}

var marshal = proto.MarshalOptions{Deterministic: true}

// NewEncoder starts an object.
func NewEncoder() *Encoder {
	out := bytes.NewBufferString(Magic)
	fw, _ := flate.NewWriter(out, flate.DefaultCompression) // the level is valid
	return &Encoder{out: out, flate: fw}
}

func (e *Encoder) record(r *dexv1.ArchiveRecord) {
	if e.err != nil {
		return
	}
	b, err := marshal.Marshal(r)
	if err != nil {
		e.err = err
		return
	}
	var n [10]byte
	_, e.err = e.flate.Write(appendUvarint(n[:0], uint64(len(b))))
	if e.err == nil {
		_, e.err = e.flate.Write(b)
	}
}

// Header writes the session's header: s without its history.
func (e *Encoder) Header(s *dexv1.Session, lastEventSeq uint64) {
	s = proto.CloneOf(s)
	s.History = nil
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_Header{Header: &dexv1.ArchiveHeader{Session: s, LastEventSeq: lastEventSeq}}})
}

// History writes the next history entry.
func (e *Encoder) History(h *dexv1.HistoryEntry) {
	e.end.History++
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_History{History: h}})
}

// Step writes the next Step, its read-time waiting_reason left out.
func (e *Encoder) Step(s *dexv1.Step) {
	e.end.Steps++
	if s.WaitingReason != "" {
		s = proto.CloneOf(s)
		s.WaitingReason = ""
	}
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_Step{Step: s}})
}

// Folded writes the next folded turn.
func (e *Encoder) Folded(f *dexv1.FoldedTurn) {
	e.end.Folded++
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_Folded{Folded: f}})
}

// Event writes the next kept event.
func (e *Encoder) Event(ev *dexv1.Event) {
	e.end.Events++
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_Event{Event: ev}})
}

// Finish writes the end record and the checksum and returns the object.
func (e *Encoder) Finish() ([]byte, error) {
	e.record(&dexv1.ArchiveRecord{Record: &dexv1.ArchiveRecord_End{End: proto.CloneOf(&e.end)}})
	if e.err == nil {
		e.err = e.flate.Close()
	}
	if e.err != nil {
		return nil, fmt.Errorf("encode the archived session: %w", e.err)
	}
	sum := sha256.Sum256(e.out.Bytes())
	e.out.Write(sum[:])
	return e.out.Bytes(), nil
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// Encode returns the archived form of a whole session.
func Encode(s *dexv1.ArchivedSession) ([]byte, error) {
	e := NewEncoder()
	e.Header(s.GetSession(), s.GetLastEventSeq())
	for _, h := range s.GetSession().GetHistory() {
		e.History(h)
	}
	for _, st := range s.GetSteps() {
		e.Step(st)
	}
	for _, f := range s.GetFoldedTurns() {
		e.Folded(f)
	}
	for _, ev := range s.GetEvents() {
		e.Event(ev)
	}
	return e.Finish()
}

// Verify checks an object's magic line, version and checksum without
// decoding its records.
func Verify(obj []byte) error {
	_, err := body(obj)
	return err
}

// body checks obj and returns its compressed records.
func body(obj []byte) ([]byte, error) {
	line, _, found := bytes.Cut(obj, []byte("\n"))
	if !found || !strings.HasPrefix(string(line), magicPrefix) {
		if len(obj) < len(Magic) && strings.HasPrefix(Magic, string(obj)) {
			return nil, fmt.Errorf("%w: truncated to %d bytes", ErrDamaged, len(obj))
		}
		return nil, fmt.Errorf("%w: not a Dex archived session (it does not begin with %q)", ErrDamaged, strings.TrimSpace(Magic))
	}
	if string(line)+"\n" != Magic {
		return nil, fmt.Errorf("archived session of format %q: this Dex reads format %d only", strings.TrimPrefix(string(line), magicPrefix), Version)
	}
	if len(obj) < len(Magic)+sumSize {
		return nil, fmt.Errorf("%w: truncated to %d bytes", ErrDamaged, len(obj))
	}
	payload, sum := obj[:len(obj)-sumSize], obj[len(obj)-sumSize:]
	if got := sha256.Sum256(payload); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: its SHA-256 does not match its content (truncated or altered, %d bytes)", ErrDamaged, len(obj))
	}
	return payload[len(Magic):], nil
}

// SessionID is the id of the session an archived object holds, read from
// its checked header record alone (the records after it are not decoded).
func SessionID(obj []byte) (string, error) {
	compressed, err := body(obj)
	if err != nil {
		return "", err
	}
	rec := &dexv1.ArchiveRecord{}
	r := bufio.NewReader(flate.NewReader(bytes.NewReader(compressed)))
	if err := (protodelim.UnmarshalOptions{MaxSize: maxRecord}).UnmarshalFrom(r, rec); err != nil {
		return "", fmt.Errorf("%w: record 1: %v", ErrDamaged, err)
	}
	if rec.GetHeader() == nil {
		return "", fmt.Errorf("%w: record 1: the header must be the first record", ErrDamaged)
	}
	return rec.GetHeader().GetSession().GetId(), nil
}

// Decode verifies an archived session and returns it whole.
func Decode(obj []byte) (*dexv1.ArchivedSession, error) {
	return DecodeWithin(obj, math.MaxInt64)
}

// ErrTooLarge is wrapped by DecodeWithin's error for an object whose
// records are larger, uncompressed, than it accepts.
var ErrTooLarge = errors.New("archived session too large")

// DecodeWithin is Decode for an object whose records, uncompressed, are at
// most maxBytes: a server decodes what a client sends without letting a
// small object inflate past what it accepts.
func DecodeWithin(obj []byte, maxBytes int64) (*dexv1.ArchivedSession, error) {
	compressed, err := body(obj)
	if err != nil {
		return nil, err
	}
	inflated := &bounded{r: flate.NewReader(bytes.NewReader(compressed)), left: maxBytes}
	r := bufio.NewReader(inflated)
	out := &dexv1.ArchivedSession{}
	var end *dexv1.ArchiveEnd
	for n := 0; ; n++ {
		rec := &dexv1.ArchiveRecord{}
		err := protodelim.UnmarshalOptions{MaxSize: maxRecord}.UnmarshalFrom(r, rec)
		if err == io.EOF && end != nil {
			break
		}
		if inflated.over {
			return nil, fmt.Errorf("%w: its records are over %d bytes uncompressed", ErrTooLarge, maxBytes)
		}
		if err != nil {
			if err == io.EOF {
				err = errors.New("it ends without its end record")
			}
			return nil, fmt.Errorf("%w: record %d: %v", ErrDamaged, n+1, err)
		}
		if end != nil {
			return nil, fmt.Errorf("%w: record %d follows the end record", ErrDamaged, n+1)
		}
		if err := place(out, rec, n); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrDamaged, n+1, err)
		}
		end = rec.GetEnd()
	}
	got := &dexv1.ArchiveEnd{History: uint64(len(out.Session.History)), Steps: uint64(len(out.Steps)), Events: uint64(len(out.Events)),
		Folded: uint64(len(out.FoldedTurns))}
	if !proto.Equal(got, end) {
		return nil, fmt.Errorf("%w: it holds %d history entries, %d Steps, %d folded turns and %d events; its end record counts %d, %d, %d and %d",
			ErrDamaged, got.History, got.Steps, got.Folded, got.Events, end.History, end.Steps, end.Folded, end.Events)
	}
	return out, nil
}

// place adds the n-th record (from 0) to out, checking the order: the
// header first, then history, Steps, folded turns and events, each part in
// order.
func place(out *dexv1.ArchivedSession, rec *dexv1.ArchiveRecord, n int) error {
	if (n == 0) != (rec.GetHeader() != nil) {
		return errors.New("the header must be the first record, and only it")
	}
	switch r := rec.Record.(type) {
	case *dexv1.ArchiveRecord_Header:
		if r.Header.Session == nil {
			return errors.New("the header holds no session")
		}
		out.Session, out.LastEventSeq = r.Header.Session, r.Header.LastEventSeq
	case *dexv1.ArchiveRecord_History:
		h := out.Session.History
		if len(out.Steps) > 0 || len(out.FoldedTurns) > 0 || len(out.Events) > 0 || (len(h) > 0 && r.History.Seq <= h[len(h)-1].Seq) {
			return fmt.Errorf("history entry %d is out of order", r.History.Seq)
		}
		out.Session.History = append(h, r.History)
	case *dexv1.ArchiveRecord_Step:
		s := out.Steps
		if len(out.FoldedTurns) > 0 || len(out.Events) > 0 || (len(s) > 0 && r.Step.Number <= s[len(s)-1].Number) {
			return fmt.Errorf("Step %s is out of order", r.Step.Id)
		}
		out.Steps = append(s, r.Step)
	case *dexv1.ArchiveRecord_Folded:
		f := out.FoldedTurns
		if len(out.Events) > 0 || (len(f) > 0 && r.Folded.Turn <= f[len(f)-1].Turn) {
			return fmt.Errorf("folded turn %d is out of order", r.Folded.Turn)
		}
		out.FoldedTurns = append(f, r.Folded)
	case *dexv1.ArchiveRecord_Event:
		ev := out.Events
		if len(ev) > 0 && r.Event.Seq <= ev[len(ev)-1].Seq {
			return fmt.Errorf("event %d is out of order", r.Event.Seq)
		}
		out.Events = append(ev, r.Event)
	case *dexv1.ArchiveRecord_End:
	default:
		return errors.New("a record of an unknown kind")
	}
	return nil
}

// bounded reads r up to left bytes; over is set when r holds more.
type bounded struct {
	r    io.Reader
	left int64
	over bool
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(b.r, one[:])
		if n > 0 {
			b.over = true
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
