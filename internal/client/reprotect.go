package client

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// ReprotectReport says what a re-protection did.
type ReprotectReport struct {
	// Moved counts the replicas or shards re-created on another node.
	Moved int
	// ChunksWritten counts the chunks written to the new nodes.
	ChunksWritten int
	// Record is the version's record after the moves.
	Record *objectpb.ObjectRecord
}

// ReprotectObject re-creates every replica or shard of the version rec
// describes whose node dead reports as dead, each on a live node the
// coordinator picks, and moves the placement there. The chunks are rebuilt
// through the scrub path: the new node answers "not found" for every chunk,
// which is damage, and the repair writes the verified data (REP) or the
// reconstructed shard (EC), with the blob's local index entry. Only a
// re-creation with every chunk written is committed; otherwise the
// coordinator collects the partial blob.
func (c *Client) ReprotectObject(ctx context.Context, rec *objectpb.ObjectRecord, dead func(id uint64) bool, wait func(ctx context.Context, bytes int64) error) (*ReprotectReport, error) {
	return c.reprotect(ctx, rec, dead, false, wait)
}

// reprotect is ReprotectObject; retired says the nodes dead names are live
// but retired their devices (the die-repair rebuild baseline).
func (c *Client) reprotect(ctx context.Context, rec *objectpb.ObjectRecord, dead func(id uint64) bool, retired bool, wait func(ctx context.Context, bytes int64) error) (*ReprotectReport, error) {
	rep := &ReprotectReport{Record: rec}
	for slot := range rec.Placement {
		from := rec.Placement[slot]
		if !dead(from) {
			continue
		}
		begin, err := c.coord.BeginReplace(ctx, &coordpb.BeginReplaceRequest{
			Key: rec.Key, Version: rec.Version, Slot: uint32(slot), From: from, Retired: retired,
		})
		if err != nil {
			return rep, fmt.Errorf("re-protect %q v%d slot %d (node %d): %w", rec.Key, rec.Version, slot, from, wire.FromStatus(err))
		}
		to := begin.Target.Id
		moved := proto.Clone(rec).(*objectpb.ObjectRecord)
		moved.Placement[slot] = to
		scrub, err := c.ScrubObject(ctx, moved, wait, nil)
		if err == nil && scrub.RepairFailed > 0 {
			err = fmt.Errorf("%d chunk writes failed", scrub.RepairFailed)
		}
		if err != nil {
			return rep, fmt.Errorf("re-protect %q v%d slot %d: re-create on node %d: %w", rec.Key, rec.Version, slot, to, err)
		}
		resp, err := c.coord.CommitReplace(ctx, &coordpb.CommitReplaceRequest{
			Key: rec.Key, Version: rec.Version, Slot: uint32(slot), From: from, To: to,
		})
		if err != nil {
			return rep, fmt.Errorf("re-protect %q v%d slot %d: commit: %w", rec.Key, rec.Version, slot, wire.FromStatus(err))
		}
		c.opts.Logf("client: %q v%d: slot %d re-created on node %d (node %d is dead), %d chunks", rec.Key, rec.Version, slot, to, from, scrub.RepairsByNode[to])
		rec = resp.Record
		rep.Record = rec
		rep.Moved++
		rep.ChunksWritten += scrub.RepairsByNode[to]
	}
	return rep, nil
}

// RebuildIndex asks the coordinator to merge the nodes' local indexes into
// the object index (objects whose record is missing or older than what the
// nodes hold are restored; see coord.RebuildIndex).
func (c *Client) RebuildIndex(ctx context.Context) (*coordpb.RebuildIndexResponse, error) {
	resp, err := c.coord.RebuildIndex(ctx, &coordpb.RebuildIndexRequest{})
	return resp, wire.FromStatus(err)
}
