package fsm

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// command is what the state machine knows of one type of command body: how
// it applies, whether it is fenced by the dispatch epoch and whether it may
// queue Steps. Each body type has one, in commandTable.
type command struct {
	// body is the body message the command is registered for.
	body protoreflect.FullName
	// apply runs the command; the body is the one registered.
	apply func(a *applier, cmd *fsmpb.Command) *Result
	// fenced: only the lease holder of the current dispatch epoch proposes
	// it; a body carrying an older epoch changes nothing.
	fenced bool
	// queuesSteps: applying it may leave a Step ready to hand to a Worker
	// (it starts or moves a turn on), so the leader predicts them.
	queuesSteps bool
}

// unfenced registers apply for the body get reads from a command.
func unfenced[B proto.Message](get func(*fsmpb.Command) B, apply func(*applier, B) *Result) command {
	var none B
	return command{
		body:  none.ProtoReflect().Descriptor().FullName(),
		apply: func(a *applier, cmd *fsmpb.Command) *Result { return apply(a, get(cmd)) },
	}
}

// epochBody is a body that carries the dispatch epoch it was proposed under.
type epochBody interface {
	proto.Message
	GetEpoch() uint64
}

// fenced registers apply for a command of the lease holder: check (nil for
// none) refuses a malformed body, then a body of a stale epoch is refused,
// then apply runs. check takes what needs no state, so a body both
// malformed and stale is refused as malformed.
func fenced[B epochBody](get func(*fsmpb.Command) B, check func(B) *Rejection, apply func(*applier, B) *Result) command {
	c := unfenced(get, func(a *applier, b B) *Result {
		if check != nil {
			if r := check(b); r != nil {
				return rejected(r)
			}
		}
		if r := a.checkEpoch(b.GetEpoch()); r != nil {
			return rejected(r)
		}
		return apply(a, b)
	})
	c.fenced = true
	return c
}

// queues marks a command that may queue Steps.
func (c command) queues() command {
	c.queuesSteps = true
	return c
}

// commandBody is the oneof of fsmpb.Command that holds the body.
var commandBody = (&fsmpb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body")

// commands finds a command by the Go type of its body's oneof wrapper: one
// lookup with no allocation, as cheap as the type switch it replaces.
var commands = indexCommands(commandTable)

// indexCommands keys the table by the oneof wrapper type of each body. A
// body registered twice or one that is no case of the oneof is a bug in the
// table, found when the package loads.
func indexCommands(table []command) map[reflect.Type]*command {
	wrappers := map[protoreflect.FullName]reflect.Type{}
	fields := commandBody.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		m := (&fsmpb.Command{}).ProtoReflect()
		m.Set(fd, m.NewField(fd))
		wrappers[fd.Message().FullName()] = reflect.TypeOf(m.Interface().(*fsmpb.Command).Body)
	}
	index := make(map[reflect.Type]*command, len(table))
	for i := range table {
		c := &table[i]
		w, ok := wrappers[c.body]
		if !ok {
			panic(fmt.Sprintf("fsm: command table: %s is not a body of fsmpb.Command", c.body))
		}
		if index[w] != nil {
			panic(fmt.Sprintf("fsm: command table: %s is registered twice", c.body))
		}
		index[w] = c
	}
	return index
}

// commandOf returns the table's entry for a command's body (nil for none).
func commandOf(cmd *fsmpb.Command) *command {
	return commands[reflect.TypeOf(cmd.Body)]
}
