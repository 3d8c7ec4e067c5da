package hashring

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"

	"github.com/flashmend/flashmend/internal/base"
)

// KeyHash is the FNV-1a 64-bit hash of an object key: its position on the
// ring (Chameleon 004 section IV-A maps objects to servers by consistent
// hashing with FNV-1a) and the object identity mixed into chunk checksums.
func KeyHash(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// ringPosition is a key's (or a virtual node's) point on the ring: the
// FNV-1a hash passed through a 64-bit finalizer (MurmurHash3's fmix64).
// NB: FNV-1a alone spreads keys that differ only in their last bytes
// ("key-1", "key-2") over a narrow arc, which unbalanced six nodes by 5x in
// TestRingPlacement; the finalizer keeps the FNV-1a identity and fixes the
// spread.
func ringPosition(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// VirtualNodes is the number of ring points per node: enough that six nodes
// share the key space within a few percent.
const VirtualNodes = 128

type point struct {
	hash uint64
	node base.NodeID
}

// Ring is a consistent-hashing ring over the cluster's members. It is
// immutable; build a new one when membership changes.
type Ring struct {
	points []point
	nodes  []base.NodeID
}

// NewRing builds the ring of members (duplicates ignored).
func NewRing(members []base.NodeID) *Ring {
	r := &Ring{}
	seen := map[base.NodeID]bool{}
	for _, m := range members {
		if m == 0 || seen[m] {
			continue
		}
		seen[m] = true
		r.nodes = append(r.nodes, m)
		for v := 0; v < VirtualNodes; v++ {
			h := fnv.New64a()
			h.Write([]byte("node-" + strconv.FormatUint(uint64(m), 10) + "-" + strconv.Itoa(v)))
			r.points = append(r.points, point{ringPosition(h.Sum64()), m})
		}
	}
	sort.Slice(r.points, func(i, j int) bool {
		if r.points[i].hash != r.points[j].hash {
			return r.points[i].hash < r.points[j].hash
		}
		return r.points[i].node < r.points[j].node
	})
	slices.Sort(r.nodes)
	return r
}

// Nodes returns the members, sorted.
func (r *Ring) Nodes() []base.NodeID { return r.nodes }

func (r *Ring) String() string { return fmt.Sprintf("ring%v", r.nodes) }

// Walk returns every member in ring order starting at key's position: the
// first n are the key's default placement.
func (r *Ring) Walk(key string) []base.NodeID {
	if len(r.points) == 0 {
		return nil
	}
	h := ringPosition(KeyHash(key))
	start := sort.Search(len(r.points), func(i int) bool { return r.points[i].hash >= h })
	out := make([]base.NodeID, 0, len(r.nodes))
	seen := map[base.NodeID]bool{}
	for i := 0; i < len(r.points) && len(out) < len(r.nodes); i++ {
		p := r.points[(start+i)%len(r.points)]
		if !seen[p.node] {
			seen[p.node] = true
			out = append(out, p.node)
		}
	}
	return out
}

// Placement is the outcome of placing an object: the default placement
// (the first n distinct members on the ring) and the actual one, where each
// unusable default node is replaced by the next usable member on the ring.
type Placement struct {
	Default []base.NodeID
	Actual  []base.NodeID
}

// Differs reports whether the actual placement is not the default one.
func (p Placement) Differs() bool { return !slices.Equal(p.Default, p.Actual) }

func (p Placement) String() string { return fmt.Sprintf("default %v actual %v", p.Default, p.Actual) }

// Place puts n copies or shards of key on distinct usable nodes. A default
// node that is usable keeps its position; the others are substituted in ring
// order. It fails when fewer than n members are usable.
func (r *Ring) Place(key string, n int, usable func(base.NodeID) bool) (Placement, error) {
	if n <= 0 {
		return Placement{}, base.InvalidArgumentf("placement of %d copies", n)
	}
	walk := r.Walk(key)
	if len(walk) < n {
		return Placement{}, fmt.Errorf("placement: %d copies need %d nodes, the cluster has %d", n, n, len(walk))
	}
	p := Placement{Default: walk[:n:n], Actual: make([]base.NodeID, n)}
	next := n // next substitute candidate in ring order
	for i, d := range p.Default {
		if usable(d) {
			p.Actual[i] = d
			continue
		}
		for next < len(walk) && !usable(walk[next]) {
			next++
		}
		if next == len(walk) {
			return Placement{}, fmt.Errorf("placement: %d copies need %d usable nodes, fewer are up", n, n)
		}
		p.Actual[i] = walk[next]
		next++
	}
	return p, nil
}
