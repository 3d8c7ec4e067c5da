package kvapi

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// ShardSpec is one range shard: its key range and its replicas.
type ShardSpec struct {
	ID    base.ShardID
	Range keyspan.Range
	// Replicas maps each replica (raft ID) to the node that holds it.
	Replicas map[base.ReplicaID]base.NodeID
}

func (s ShardSpec) String() string {
	return fmt.Sprintf("%s%s replicas=%v", s.ID, s.Range, s.Replicas)
}

// ReplicaOn returns the shard's replica on node n.
func (s ShardSpec) ReplicaOn(n base.NodeID) (base.ReplicaID, bool) {
	for r, node := range s.Replicas {
		if node == n {
			return r, true
		}
	}
	return 0, false
}

// Layout is the shard map: shards cover the key space without gaps or
// overlaps. In a cluster the coordinator places it once (coord KVLayout);
// replicas do not move.
type Layout struct {
	// Shards sorted by start key.
	Shards []ShardSpec
}

// Validate checks the layout is well formed.
func (l *Layout) Validate() error {
	if len(l.Shards) == 0 {
		return base.InvalidArgumentf("kv: layout has no shards")
	}
	sort.Slice(l.Shards, func(i, j int) bool { return bytes.Compare(l.Shards[i].Range.Start, l.Shards[j].Range.Start) < 0 })
	seen := map[base.ShardID]bool{}
	for i, s := range l.Shards {
		if s.ID == 0 || seen[s.ID] {
			return base.InvalidArgumentf("kv: shard id %d zero or repeated", s.ID)
		}
		seen[s.ID] = true
		if len(s.Replicas) == 0 {
			return base.InvalidArgumentf("kv: shard %s has no replicas", s.ID)
		}
		nodes := map[base.NodeID]bool{}
		for r, n := range s.Replicas {
			if r == 0 || n == 0 || nodes[n] {
				return base.InvalidArgumentf("kv: shard %s: replica %d on node %d (zero or two replicas on one node)", s.ID, r, n)
			}
			nodes[n] = true
		}
		if i == 0 && len(s.Range.Start) != 0 {
			return base.InvalidArgumentf("kv: first shard must start at the empty key")
		}
		if i > 0 && !bytes.Equal(l.Shards[i-1].Range.End, s.Range.Start) {
			return base.InvalidArgumentf("kv: gap or overlap between %s and %s", l.Shards[i-1].ID, s.ID)
		}
		if i == len(l.Shards)-1 && len(s.Range.End) != 0 {
			return base.InvalidArgumentf("kv: last shard must be unbounded")
		}
	}
	return nil
}

// ShardFor returns the shard holding key.
func (l *Layout) ShardFor(key []byte) ShardSpec {
	i := sort.Search(len(l.Shards), func(i int) bool {
		return len(l.Shards[i].Range.End) == 0 || bytes.Compare(key, l.Shards[i].Range.End) < 0
	})
	return l.Shards[i]
}

// Shard returns the shard with id.
func (l *Layout) Shard(id base.ShardID) (ShardSpec, bool) {
	for _, s := range l.Shards {
		if s.ID == id {
			return s, true
		}
	}
	return ShardSpec{}, false
}

// UniformLayout splits the key space at the given split keys into shards
// 1..len(splits)+1, each replicated on every node in nodes (replica ID =
// node ID).
func UniformLayout(nodes []base.NodeID, splits ...string) Layout {
	var l Layout
	start := []byte{}
	for i := 0; i <= len(splits); i++ {
		var end []byte
		if i < len(splits) {
			end = []byte(splits[i])
		}
		reps := map[base.ReplicaID]base.NodeID{}
		for _, n := range nodes {
			reps[base.ReplicaID(n)] = n
		}
		l.Shards = append(l.Shards, ShardSpec{ID: base.ShardID(i + 1), Range: keyspan.Range{Start: start, End: end}, Replicas: reps})
		start = end
	}
	return l
}

// Proto returns the layout as the coordinator stores and sends it.
func (l *Layout) Proto() *kvpb.ShardMap {
	m := &kvpb.ShardMap{}
	for _, s := range l.Shards {
		p := &kvpb.ShardPlacement{Id: uint64(s.ID), Start: s.Range.Start, End: s.Range.End, Replicas: map[uint64]uint64{}}
		for r, n := range s.Replicas {
			p.Replicas[uint64(r)] = uint64(n)
		}
		m.Shards = append(m.Shards, p)
	}
	return m
}

// LayoutFromProto returns the layout m describes, validated.
func LayoutFromProto(m *kvpb.ShardMap) (Layout, error) {
	var l Layout
	for _, p := range m.GetShards() {
		s := ShardSpec{ID: base.ShardID(p.Id), Range: keyspan.Range{Start: p.Start, End: p.End}, Replicas: map[base.ReplicaID]base.NodeID{}}
		for r, n := range p.Replicas {
			s.Replicas[base.ReplicaID(r)] = base.NodeID(n)
		}
		l.Shards = append(l.Shards, s)
	}
	return l, l.Validate()
}
