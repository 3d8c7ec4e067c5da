package sim

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/wear"
)

// ring is the simulator's default placement: consistent hashing with
// FNV-1a as paper 004 section IV-A and the coordinator's hashring.Ring do
// (virtual nodes, a 64-bit finalizer over FNV-1a so that consecutive IDs
// spread), written for fleets of 10,000 servers. It implements
// wear.Placer.
type ring struct {
	hashes []uint64
	nodes  []base.NodeID
	n      int
}

// ringVirtualNodes is the points per server: 256 spreads 50 servers'
// shares of the key space with a standard deviation of about 6% and keeps
// a 10,000-server ring at 2.56 million points (41 MB); larger fleets get 64.
func ringVirtualNodes(servers int) int {
	if servers > 10_000 {
		return 64
	}
	return 256
}

func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func fnvPosition(kind byte, a, b uint64) uint64 {
	h := fnv.New64a()
	var buf [17]byte
	buf[0] = kind
	binary.LittleEndian.PutUint64(buf[1:], a)
	binary.LittleEndian.PutUint64(buf[9:], b)
	h.Write(buf[:])
	return mix64(h.Sum64())
}

func newRing(servers int) *ring {
	type point struct {
		h uint64
		n base.NodeID
	}
	vnodes := ringVirtualNodes(servers)
	pts := make([]point, 0, servers*vnodes)
	for s := 1; s <= servers; s++ {
		for v := 0; v < vnodes; v++ {
			pts = append(pts, point{fnvPosition('n', uint64(s), uint64(v)), base.NodeID(s)})
		}
	}
	slices.SortFunc(pts, func(x, y point) int {
		switch {
		case x.h < y.h:
			return -1
		case x.h > y.h:
			return 1
		case x.n < y.n:
			return -1
		case x.n > y.n:
			return 1
		}
		return 0
	})
	r := &ring{hashes: make([]uint64, len(pts)), nodes: make([]base.NodeID, len(pts)), n: servers}
	for i, p := range pts {
		r.hashes[i], r.nodes[i] = p.h, p.n
	}
	return r
}

// Walk implements wear.Placer: distinct servers clockwise from the
// object's point.
func (r *ring) Walk(id wear.ObjectID, visit func(base.NodeID) bool) {
	h := fnvPosition('o', uint64(id), 0)
	i, _ := slices.BinarySearch(r.hashes, h)
	var seen [2 * wear.MaxWidth]base.NodeID
	var seenMap map[base.NodeID]bool
	count := 0
	for k := 0; k < len(r.nodes) && count < r.n; k++ {
		n := r.nodes[(i+k)%len(r.nodes)]
		dup := false
		if count < len(seen) {
			for _, s := range seen[:count] {
				if s == n {
					dup = true
					break
				}
			}
		} else {
			if seenMap == nil {
				seenMap = map[base.NodeID]bool{}
				for _, s := range seen {
					seenMap[s] = true
				}
			}
			dup = seenMap[n]
		}
		if dup {
			continue
		}
		if count < len(seen) {
			seen[count] = n
		} else {
			seenMap[n] = true
		}
		count++
		if !visit(n) {
			return
		}
	}
}
