package server

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

const (
	// MaxImportChunk bounds one message of an ImportSession stream,
	// MaxImportObject the whole archive object it sends.
	MaxImportChunk  = 1 << 20
	MaxImportObject = 256 << 20
	// maxImportInflated bounds what an object's records inflate to: the
	// session is held in the leader's memory while it is proposed.
	maxImportInflated = 1 << 30
	// importTimeout bounds the proposals of one import once it began; they
	// go on if the client leaves, so an import is not left half-way.
	importTimeout = 10 * time.Minute
)

// ImportSession brings an archived session back: the whole object is read
// and verified, every check of the import's commands is run, and only
// then are they proposed (fsm ImportSessionBegin, Pages, End). A change of
// leader meanwhile cuts it: the new leader discards it, the client sends
// the object again.
func (s *Sessions) ImportSession(stream dexv1.SessionService_ImportSessionServer) error {
	ctx := stream.Context()
	if err := s.check(ctx); err != nil {
		return err
	}
	limit := s.importLimit
	if limit == 0 {
		limit = MaxImportObject
	}
	obj, err := readImport(stream, limit)
	if err != nil {
		return err
	}
	arch, err := format.DecodeWithin(obj, maxImportInflated)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "not an importable archived session: %v", err)
	}
	id := arch.Session.GetId()
	if s.partitions > 1 && wirerules.PartitionOf(id, s.partitions) != s.partition {
		return status.Errorf(codes.InvalidArgument, "session %q lives in partition %d of %d, not %d: send the import to any node, which routes it", id, wirerules.PartitionOf(id, s.partitions), s.partitions, s.partition)
	}
	if !s.node.MembersApply(fsm.ImportLogVersion) {
		return status.Errorf(codes.FailedPrecondition, "a member of the cluster runs a Dex that cannot apply an import (log version below %d): upgrade every node, then import", fsm.ImportLogVersion)
	}
	if s.node.State().Session(id) != nil {
		return status.Errorf(codes.AlreadyExists, "session %q already exists", id)
	}
	begin, pages, end := importCommands(arch, s.node.Epoch())
	if r := fsm.CheckImport(begin, pages, end); r != nil {
		return RejectionStatus(r)
	}
	// From here on the import runs to its end whatever the client does:
	// its proposals do not follow the stream's context.
	pctx, cancel := context.WithTimeout(context.Background(), importTimeout)
	defer cancel()
	if _, err := s.propose(pctx, &fsmpb.Command{Body: &fsmpb.Command_ImportSessionBegin{ImportSessionBegin: begin}}); err != nil {
		return err
	}
	for _, p := range pages {
		if _, err := s.propose(pctx, &fsmpb.Command{Body: &fsmpb.Command_ImportSessionPage{ImportSessionPage: p}}); err != nil {
			return cutImport(id, err)
		}
	}
	if _, err := s.propose(pctx, &fsmpb.Command{Body: &fsmpb.Command_ImportSessionEnd{ImportSessionEnd: end}}); err != nil {
		return cutImport(id, err)
	}
	return stream.SendAndClose(&dexv1.ImportSessionResponse{SessionId: id, History: end.History, Steps: end.Steps, Events: end.Events,
		FoldedTurns: end.Folded})
}

// cutImport is the answer to an import whose proposals stopped after its
// Begin: the leader changed (or its epoch did), and the next one discards
// what was imported. Aborted, not Unavailable: the import was partly
// applied, so a client does not repeat it as a call that changed nothing.
func cutImport(id string, err error) error {
	return status.Errorf(codes.Aborted, "the import of session %s was cut by a change of leader (%s): the new leader discards it; send it again once it is gone", id, status.Convert(err).Message())
}

// readImport reads the stream's chunks into one object, refusing a chunk
// over MaxImportChunk and an object over limit bytes.
func readImport(stream dexv1.SessionService_ImportSessionServer, limit int) ([]byte, error) {
	var obj []byte
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if n := len(req.Chunk); n > MaxImportChunk {
			return nil, status.Errorf(codes.InvalidArgument, "an import chunk is at most %d bytes (1 MiB), got %d", MaxImportChunk, n)
		}
		if len(obj)+len(req.Chunk) > limit {
			return nil, status.Errorf(codes.InvalidArgument, "an archived session to import is at most %d bytes; this one is larger", limit)
		}
		obj = append(obj, req.Chunk...)
	}
	if len(obj) == 0 {
		return nil, status.Error(codes.InvalidArgument, "the import sent no bytes: send an archived session (dexctl session export)")
	}
	return obj, nil
}

// importCommands converts an archived session into the bodies of its
// import in epoch: the header and inbox, pages of at most fsm.MaxImportRows
// rows and about fsm.MaxImportBytes in archive order, and the counts.
func importCommands(arch *dexv1.ArchivedSession, epoch uint64) (*fsmpb.ImportSessionBegin, []*fsmpb.ImportSessionPage, *fsmpb.ImportSessionEnd) {
	header := proto.CloneOf(arch.Session)
	header.History, header.Inbox = nil, nil
	id := header.Id
	begin := &fsmpb.ImportSessionBegin{Epoch: epoch, Session: fsmpb.SessionFromAPI(header), LastEventSeq: arch.LastEventSeq}
	for _, m := range arch.Session.Inbox {
		begin.Inbox = append(begin.Inbox, fsmpb.InboxMessageFromAPI(m))
	}
	end := &fsmpb.ImportSessionEnd{SessionId: id, Epoch: epoch,
		History: uint64(len(arch.Session.History)), Steps: uint64(len(arch.Steps)), Events: uint64(len(arch.Events)),
		Folded: uint64(len(arch.FoldedTurns))}

	var pages []*fsmpb.ImportSessionPage
	page, rows, size := &fsmpb.ImportSessionPage{SessionId: id, Epoch: epoch}, 0, 0
	// room makes the page take a row of n bytes, starting a new one first
	// when it would pass either bound.
	room := func(n int) {
		if rows > 0 && (rows == fsm.MaxImportRows || size+n > fsm.MaxImportBytes) {
			pages = append(pages, page)
			page, rows, size = &fsmpb.ImportSessionPage{SessionId: id, Epoch: epoch}, 0, 0
		}
		rows++
		size += n
	}
	for _, h := range arch.Session.History {
		row := fsmpb.HistoryEntryFromAPI(h)
		room(proto.Size(row))
		page.History = append(page.History, row)
	}
	for _, st := range arch.Steps {
		row := fsmpb.StepFromAPI(st)
		room(proto.Size(row))
		page.Steps = append(page.Steps, row)
	}
	for _, f := range arch.FoldedTurns {
		row := fsmpb.FoldedTurnFromAPI(f)
		room(proto.Size(row))
		page.Folded = append(page.Folded, row)
	}
	for _, ev := range arch.Events {
		row := fsmpb.EventFromAPI(ev)
		room(proto.Size(row))
		page.Events = append(page.Events, row)
	}
	if rows > 0 {
		pages = append(pages, page)
	}
	return begin, pages, end
}
