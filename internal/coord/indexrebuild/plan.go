package indexrebuild

import (
	"fmt"
	"slices"
	"sort"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

// Report is one local index entry and the node that reported it.
type Report struct {
	Node uint64
	Info *nodepb.BlobInfo
}

// Plan is what Merge decides.
type Plan struct {
	// Restore are the records to write (a key absent or older in the
	// index), in key order.
	Restore []*objectpb.ObjectRecord
	// Garbage are versions to collect: the blobs on the nodes listed.
	Garbage []*objectpb.PendingPut
	// Kept counts keys whose record already names the chosen version or a
	// newer one; Unrestorable counts blobs whose entries lack the size or
	// placement; Incomplete counts keys restored at a version with too
	// few whole replicas or shards.
	Kept, Unrestorable, Incomplete int
	// MaxVersion and MaxNode are the largest version and node ID seen.
	MaxVersion, MaxNode uint64
}

func (p Plan) String() string {
	return fmt.Sprintf("restore %d, garbage %d, kept %d, unrestorable %d, incomplete %d, max version %d, max node %d",
		len(p.Restore), len(p.Garbage), p.Kept, p.Unrestorable, p.Incomplete, p.MaxVersion, p.MaxNode)
}

// Merge merges the nodes' reports into the index current (key ->
// record). pending and garbage are the versions the index knows as in
// flight or collected.
func Merge(reports []Report, current map[string]*objectpb.ObjectRecord, pending, garbage map[uint64]bool) Plan {
	var plan Plan
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
		in := r.Info
		plan.MaxVersion = max(plan.MaxVersion, in.Version)
		plan.MaxNode = max(plan.MaxNode, r.Node)
		for _, id := range in.Placement {
			plan.MaxNode = max(plan.MaxNode, id)
		}
		red, copies := parseRedundancy(in.Redundancy)
		if in.Key == "" || in.SizeBytes < 0 || copies == 0 || len(in.Placement) != copies || int(in.Shard) >= copies {
			plan.Unrestorable++
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
			plan.Unrestorable++ // two entries disagree on what the version is
			continue
		}
		if !slices.Contains(v.holders[in.Shard], r.Node) {
			v.holders[in.Shard] = append(v.holders[in.Shard], r.Node)
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
			plan.Garbage = append(plan.Garbage, &objectpb.PendingPut{Key: v.key, Object: v.object, Version: v.version, Placement: nodes})
		}
		if cur != nil && cur.Version >= chosen.version {
			plan.Kept++
			continue
		}
		if !complete(chosen) {
			plan.Incomplete++
		}
		rec := &objectpb.ObjectRecord{Key: chosen.key, Object: chosen.object, Version: chosen.version,
			SizeBytes: chosen.size, Redundancy: chosen.red, Placement: restoredPlacement(chosen.red, chosen.placement, chosen.holders),
			CreatedUnixMs: chosen.created, KeyVersion: 1}
		if cur != nil {
			rec.KeyVersion = cur.KeyVersion + 1
			plan.Garbage = append(plan.Garbage, &objectpb.PendingPut{Key: cur.Key, Object: cur.Object, Version: cur.Version, Placement: cur.Placement})
		}
		plan.Restore = append(plan.Restore, rec)
	}
	sort.Slice(plan.Garbage, func(a, b int) bool { return plan.Garbage[a].Version < plan.Garbage[b].Version })
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
