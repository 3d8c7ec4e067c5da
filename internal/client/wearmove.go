package client

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// WearMoveReport says what a round of wear moves did.
type WearMoveReport struct {
	Moves, Done, Failed int
	// ChunksWritten counts the chunks written to the moves' destinations.
	ChunksWritten int
	Bytes         int64
}

// RunWearMoves carries out up to limit moves the coordinator's wear
// balancer asks for (internal/wear: the migration of EWO data that is not
// written again, EDM's migrations). Each moves one replica or shard of the
// current version: BeginReplace with the balancer's destination, the part
// re-created there through the scrub path (every chunk read from the other
// parts, verified against its checksums, rebuilt for EC, and verified again
// by the destination before it acknowledges), then CommitReplace, which
// switches the record in one transaction and lists the source's part as
// garbage. Until the commit the object is read from its old layout; a move
// cut short by a crash leaves a pending replacement that expires and is
// collected. Every move's outcome is reported to the coordinator. wait, when
// set, throttles the reads as the scrubber's budget does.
func (c *Client) RunWearMoves(ctx context.Context, limit int, wait func(ctx context.Context, bytes int64) error) (*WearMoveReport, error) {
	resp, err := c.coord.WearMoves(ctx, &coordpb.WearMovesRequest{Limit: int32(limit)})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	rep := &WearMoveReport{}
	for _, mv := range resp.Moves {
		rep.Moves++
		chunks, err := c.wearMove(ctx, mv, wait)
		done := &coordpb.WearMoveDoneRequest{Id: mv.Id, Ok: err == nil}
		if err != nil {
			done.Error = err.Error()
			rep.Failed++
			c.opts.Logf("client: wear move of %q slot %d to node %d: %v", mv.Key, mv.Slot, mv.To, err)
		} else {
			rep.Done++
			rep.ChunksWritten += chunks
			rep.Bytes += mv.Bytes
		}
		if _, rerr := c.coord.WearMoveDone(ctx, done); rerr != nil && ctx.Err() == nil {
			c.opts.Logf("client: reporting wear move %d: %v", mv.Id, wire.FromStatus(rerr))
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

func (c *Client) wearMove(ctx context.Context, mv *coordpb.WearMove, wait func(ctx context.Context, bytes int64) error) (int, error) {
	return c.MovePart(ctx, PartMove{Key: mv.Key, Version: mv.Version, Slot: mv.Slot, From: mv.From, To: mv.To, Reason: mv.Reason}, wait, nil)
}

// PartMove names one replica or shard of one version and where it goes.
type PartMove struct {
	Key      string
	Version  uint64
	Slot     uint32
	From, To uint64
	Reason   string // for the log
}

// MoveStep is a point between the steps of a part move at which a failpoint
// (MovePart's failpoint) can stop it.
type MoveStep int

const (
	// MoveBegun: BeginReplace recorded the pending replacement; nothing
	// is on the destination yet.
	MoveBegun MoveStep = iota + 1
	// MoveCopying: before each chunk (REP) or row (EC) of the copy; the
	// earlier ones are on the destination, verified.
	MoveCopying
	// MoveCopied: every chunk verified on the destination, before
	// CommitReplace.
	MoveCopied
	// MoveCommitted: the record switched to the destination in one
	// transaction and the source part is listed as garbage.
	MoveCommitted
)

func (s MoveStep) String() string {
	switch s {
	case MoveBegun:
		return "begun"
	case MoveCopying:
		return "copying"
	case MoveCopied:
		return "copied"
	case MoveCommitted:
		return "committed"
	}
	return fmt.Sprintf("step(%d)", int(s))
}

// MovePart moves one part of the current version of an object from node
// From to node To, the way the wear mover does: BeginReplace with To, the
// part re-created there through the scrub path (every chunk read from the
// other parts and verified, rebuilt for EC, and verified again by the
// destination before it acknowledges), CommitReplace. It returns the chunks
// written to To.
//
// Crash safety: until CommitReplace the record names the old layout, which
// is whole (the source part is only read); the commit switches the record
// in one etcd transaction, after which the new layout is whole (every chunk
// was verified on To). A move stopped anywhere before the commit leaves a
// pending replacement that the sweeper retires at its deadline (deleting
// what reached To); one stopped after it leaves the source's part listed as
// garbage. failpoint, nil outside tests, is called at each MoveStep; an
// error it returns stops the move there, undoing nothing, as a crash of the
// mover would, and is returned.
func (c *Client) MovePart(ctx context.Context, mv PartMove, wait func(ctx context.Context, bytes int64) error, failpoint func(MoveStep) error) (int, error) {
	step := func(s MoveStep) error {
		if failpoint == nil {
			return nil
		}
		return failpoint(s)
	}
	lk, err := c.coord.Lookup(ctx, &coordpb.LookupRequest{Key: mv.Key})
	if err != nil {
		return 0, wire.FromStatus(err)
	}
	rec := lk.Record
	if rec.Version != mv.Version || int(mv.Slot) >= len(rec.Placement) || rec.Placement[mv.Slot] != mv.From {
		return 0, fmt.Errorf("stale: %q is now v%d on %v", mv.Key, rec.Version, rec.Placement)
	}
	if rec.SizeBytes == 0 {
		return 0, fmt.Errorf("an empty object has no chunk to move")
	}
	if _, err := c.coord.BeginReplace(ctx, &coordpb.BeginReplaceRequest{
		Key: rec.Key, Version: rec.Version, Slot: mv.Slot, From: mv.From, To: mv.To,
	}); err != nil {
		return 0, fmt.Errorf("begin: %w", wire.FromStatus(err))
	}
	if err := step(MoveBegun); err != nil {
		return 0, err
	}
	moved := proto.Clone(rec).(*objectpb.ObjectRecord)
	moved.Placement[mv.Slot] = mv.To
	copyWait := func(ctx context.Context, bytes int64) error {
		if err := step(MoveCopying); err != nil {
			return err
		}
		if wait != nil {
			return wait(ctx, bytes)
		}
		return nil
	}
	scrub, err := c.ScrubObject(ctx, moved, copyWait, nil)
	if err == nil && scrub.RepairFailed > 0 {
		err = fmt.Errorf("%d chunk writes failed", scrub.RepairFailed)
	}
	if err == nil && scrub.RepairsByNode[mv.To] != scrub.Chunks {
		err = fmt.Errorf("node %d got %d of %d chunks", mv.To, scrub.RepairsByNode[mv.To], scrub.Chunks)
	}
	if err != nil {
		return 0, fmt.Errorf("copy to node %d: %w", mv.To, err)
	}
	if err := step(MoveCopied); err != nil {
		return 0, err
	}
	if _, err := c.coord.CommitReplace(ctx, &coordpb.CommitReplaceRequest{
		Key: rec.Key, Version: rec.Version, Slot: mv.Slot, From: mv.From, To: mv.To,
	}); err != nil {
		return 0, fmt.Errorf("commit: %w", wire.FromStatus(err))
	}
	c.opts.Logf("client: %q v%d: slot %d moved from node %d to node %d (%s), %d chunks", rec.Key, rec.Version, mv.Slot, mv.From, mv.To, mv.Reason, scrub.RepairsByNode[mv.To])
	if err := step(MoveCommitted); err != nil {
		return scrub.RepairsByNode[mv.To], err
	}
	return scrub.RepairsByNode[mv.To], nil
}

// WearStatus reports the coordinator's wear balancer: policy, epoch, the
// nodes' erase counts, the state mix and the moves.
func (c *Client) WearStatus(ctx context.Context) (*coordpb.WearStatusResponse, error) {
	st, err := c.coord.WearStatus(ctx, &coordpb.WearStatusRequest{})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	return st, nil
}
