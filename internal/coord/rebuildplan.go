package coord

import (
	"fmt"
	"slices"
	"sort"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// The object index rebuilt from the nodes' local indexes: a pure core
// (planRebuild) and the I/O around it (rebuild.go).
//
// Every node keeps, per replica or shard it holds, a local index entry with
// the key, the version, the shard, the version's size and placement as
// written (objstore.BlobInfo), and can count the chunks it holds. From all
// nodes' entries the coordinator can name every object version the cluster
// stores. The plan, per key:
//
//   - versions the coordinator knows as in flight (pending) or collected
//     (garbage) are left alone;
//   - a version is complete when enough replicas or shards are whole (every
//     chunk present on the node): one replica (REP) or four shards (EC);
//   - the key's record is the newest complete version (or, if none is
//     complete, the newest version: all there is), unless the current
//     record already names that version or a newer one;
//   - every other version found is garbage (older versions whose collection
//     was lost with the store, writes that never committed).
//
// The placement of a restored version is the one recorded in its entries,
// with each slot moved to the node that actually reports holding it (a
// replica re-created elsewhere, a shard found on another node).
//
// What a rebuild cannot know: deletions whose blobs were not collected yet
// come back (the sweeper collects within seconds of a delete), and a write
// whose chunks were all written but never committed becomes visible (as if
// it had committed); per-key version numbers (KeyVersion) start again at 1.

// reportedBlob is one local index entry and the node that reported it.
type reportedBlob struct {
	node uint64
	info *nodepb.BlobInfo
}

// rebuildPlan is what planRebuild decides.
type rebuildPlan struct {
	// restore are the records to write (a key absent or older in the
	// index), in key order.
	restore []*objectpb.ObjectRecord
	// garbage are versions to collect: the blobs on the nodes listed.
	garbage []*objectpb.PendingPut
	// kept counts keys whose record already names the chosen version or a
	// newer one; unrestorable counts blobs whose entries lack the size or
	// placement; incomplete counts keys restored at a version with too
	// few whole replicas or shards.
	kept, unrestorable, incomplete int
	// maxVersion and maxNode are the largest version and node ID seen.
	maxVersion, maxNode uint64
}

func (p rebuildPlan) String() string {
	return fmt.Sprintf("restore %d, garbage %d, kept %d, unrestorable %d, incomplete %d, max version %d, max node %d",
		len(p.restore), len(p.garbage), p.kept, p.unrestorable, p.incomplete, p.maxVersion, p.maxNode)
}

// planRebuild merges the nodes' reports into the index current (key ->
// record). pending and garbage are the versions the index knows as in
// flight or collected.
func planRebuild(reports []reportedBlob, current map[string]*objectpb.ObjectRecord, pending, garbage map[uint64]bool) rebuildPlan {
	var plan rebuildPlan
	type version struct {
		key     string
		object  uint64
		version uint64
		red     objectpb.Redundancy
		size    int64
		created int64
		chunks  uint32
		// recorded placement (from the entry naming the most slots) and
		// the nodes reporting each shard, with whether they are whole.
		placement []uint64
		holders   map[uint32][]uint64
		whole     map[uint32]int
	}
	versions := map[uint64]*version{} // by version number (cluster-unique)
	for _, r := range reports {
		in := r.info
		plan.maxVersion = max(plan.maxVersion, in.Version)
		plan.maxNode = max(plan.maxNode, r.node)
		for _, id := range in.Placement {
			plan.maxNode = max(plan.maxNode, id)
		}
		red, copies := parseRedundancy(in.Redundancy)
		if in.Key == "" || in.SizeBytes < 0 || copies == 0 || len(in.Placement) != copies || int(in.Shard) >= copies {
			plan.unrestorable++
			continue
		}
		v := versions[in.Version]
		if v == nil {
			v = &version{key: in.Key, object: in.Object, version: in.Version, red: red, size: in.SizeBytes,
				created: in.CreatedUnixMs, chunks: in.Chunks, placement: slices.Clone(in.Placement),
				holders: map[uint32][]uint64{}, whole: map[uint32]int{}}
			versions[in.Version] = v
		}
		if v.key != in.Key || v.object != in.Object || v.red != red || v.size != in.SizeBytes {
			plan.unrestorable++ // two entries disagree on what the version is
			continue
		}
		if !slices.Contains(v.holders[in.Shard], r.node) {
			v.holders[in.Shard] = append(v.holders[in.Shard], r.node)
			if in.ChunksPresent >= in.Chunks {
				v.whole[in.Shard]++
			}
		}
	}
	byKey := map[string][]*version{}
	for _, v := range versions {
		if pending[v.version] || garbage[v.version] {
			continue
		}
		byKey[v.key] = append(byKey[v.key], v)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	complete := func(v *version) bool {
		whole := 0
		for _, n := range v.whole {
			if n > 0 {
				whole++
			}
		}
		if v.red == objectpb.Redundancy_REP {
			return v.whole[0] > 0
		}
		return whole >= 4
	}
	for _, key := range keys {
		vs := byKey[key]
		sort.Slice(vs, func(a, b int) bool { return vs[a].version > vs[b].version })
		chosen := vs[0]
		for _, v := range vs {
			if complete(v) {
				chosen = v
				break
			}
		}
		cur := current[key]
		for _, v := range vs {
			if v == chosen || (cur != nil && v.version == cur.Version) {
				continue
			}
			var nodes []uint64
			for _, hs := range v.holders {
				for _, h := range hs {
					if !slices.Contains(nodes, h) {
						nodes = append(nodes, h)
					}
				}
			}
			slices.Sort(nodes)
			plan.garbage = append(plan.garbage, &objectpb.PendingPut{Key: v.key, Object: v.object, Version: v.version, Placement: nodes})
		}
		if cur != nil && cur.Version >= chosen.version {
			plan.kept++
			continue
		}
		if !complete(chosen) {
			plan.incomplete++
		}
		rec := &objectpb.ObjectRecord{Key: chosen.key, Object: chosen.object, Version: chosen.version,
			SizeBytes: chosen.size, Redundancy: chosen.red, Placement: restoredPlacement(chosen.red, chosen.placement, chosen.holders),
			CreatedUnixMs: chosen.created, KeyVersion: 1}
		if cur != nil {
			rec.KeyVersion = cur.KeyVersion + 1
			plan.garbage = append(plan.garbage, &objectpb.PendingPut{Key: cur.Key, Object: cur.Object, Version: cur.Version, Placement: cur.Placement})
		}
		plan.restore = append(plan.restore, rec)
	}
	sort.Slice(plan.garbage, func(a, b int) bool { return plan.garbage[a].Version < plan.garbage[b].Version })
	return plan
}

// restoredPlacement is the recorded placement with each slot moved to a node
// that reports holding it. REP: every replica is shard 0, so the recorded
// nodes that report it keep their slots and the slots of those that do not
// go to reporting nodes not in the placement. EC: slot i goes to a node
// reporting shard i, the recorded one if it does.
func restoredPlacement(red objectpb.Redundancy, recorded []uint64, holders map[uint32][]uint64) []uint64 {
	out := slices.Clone(recorded)
	if red == objectpb.Redundancy_REP {
		var extra []uint64
		for _, h := range holders[0] {
			if !slices.Contains(recorded, h) {
				extra = append(extra, h)
			}
		}
		slices.Sort(extra)
		for i, id := range out {
			if len(extra) > 0 && !slices.Contains(holders[0], id) {
				out[i], extra = extra[0], extra[1:]
			}
		}
		return out
	}
	for i := range out {
		hs := holders[uint32(i)]
		if len(hs) == 0 || slices.Contains(hs, out[i]) {
			continue
		}
		for _, h := range hs {
			if !slices.Contains(out, h) {
				out[i] = h
				break
			}
		}
	}
	return out
}

// parseRedundancy reads a local index entry's redundancy name.
func parseRedundancy(s string) (objectpb.Redundancy, int) {
	switch s {
	case "rep":
		return objectpb.Redundancy_REP, 3
	case "ec":
		return objectpb.Redundancy_EC, 6
	}
	return objectpb.Redundancy_REDUNDANCY_UNSPECIFIED, 0
}
