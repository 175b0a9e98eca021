// Package lease is the leader's term. The dispatch lease is the epoch a
// leader opens when it establishes leadership: every command a leader-only
// service proposes carries it, so those of a deposed leader are refused.
// Runtime starts and stops every leader-only service in one order, each in
// an epoch-fenced Term held by a Fence; Deadlines keeps the attempt
// deadlines (heartbeat and run); Workers keeps the Worker liveness; lease/gc
// holds the collectors.
package lease
