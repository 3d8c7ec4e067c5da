package indexrebuild

import (
	"github.com/flashmend/flashmend/internal/coord/hashring"
	"reflect"
	"testing"

	"github.com/flashmend/flashmend/internal/gen/nodepb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
)

func blob(node uint64, key string, version uint64, red string, shard uint32, chunks, present uint32, placement ...uint64) Report {
	return Report{Node: node, Info: &nodepb.BlobInfo{Key: key, Object: hashring.KeyHash(key), Version: version, Shard: shard,
		Redundancy: red, Chunks: chunks, ChunksPresent: present, SizeBytes: int64(chunks) * 1000, Placement: placement}}
}

func TestPlanRebuild(t *testing.T) {
	reports := []Report{
		// a: REP v10 on 1,2,3 (node 3 moved the replica to node 4).
		blob(1, "a", 10, "rep", 0, 2, 2, 1, 2, 3),
		blob(2, "a", 10, "rep", 0, 2, 2, 1, 2, 3),
		blob(4, "a", 10, "rep", 0, 2, 2, 1, 2, 3),
		// b: v20 complete, v30 written on one node only and unfinished
		// (a crashed put): v20 is restored, v30 collected.
		blob(1, "b", 20, "rep", 0, 1, 1, 1, 2, 3),
		blob(2, "b", 30, "rep", 0, 4, 1, 2, 3, 4),
		// c: EC v40, shards 0..5 on 1..6, shard 2 reported by node 7.
		blob(1, "c", 40, "ec", 0, 1, 1, 1, 2, 3, 4, 5, 6),
		blob(2, "c", 40, "ec", 1, 1, 1, 1, 2, 3, 4, 5, 6),
		blob(7, "c", 40, "ec", 2, 1, 1, 1, 2, 3, 4, 5, 6),
		blob(4, "c", 40, "ec", 3, 1, 1, 1, 2, 3, 4, 5, 6),
		// d: v50 is pending in the index: left alone.
		blob(1, "d", 50, "rep", 0, 1, 1, 1, 2, 3),
		// e: the index already names v60; the nodes also hold v55.
		blob(1, "e", 55, "rep", 0, 1, 1, 1, 2, 3),
		blob(1, "e", 60, "rep", 0, 1, 1, 1, 2, 3),
		// f: an entry written before sizes and placements were recorded.
		{Node: 3, Info: &nodepb.BlobInfo{Key: "f", Object: hashring.KeyHash("f"), Version: 70, Redundancy: "rep", Chunks: 1}},
		// g: only an old version in the index; the nodes hold a newer one.
		blob(5, "g", 80, "rep", 0, 1, 1, 5, 6, 1),
	}
	current := map[string]*objectpb.ObjectRecord{
		"e": {Key: "e", Object: hashring.KeyHash("e"), Version: 60, KeyVersion: 4},
		"g": {Key: "g", Object: hashring.KeyHash("g"), Version: 75, KeyVersion: 2, Placement: []uint64{5, 6, 1}},
	}
	plan := Merge(reports, current, map[uint64]bool{50: true}, nil)
	t.Logf("plan: %s", plan)
	var restored []string
	for _, r := range plan.Restore {
		restored = append(restored, r.Key)
		switch r.Key {
		case "a":
			if !reflect.DeepEqual(r.Placement, []uint64{1, 2, 4}) || r.Version != 10 || r.KeyVersion != 1 || r.SizeBytes != 2000 {
				t.Errorf("a: %v", r)
			}
		case "b":
			if r.Version != 20 {
				t.Errorf("b: %v", r)
			}
		case "c":
			if !reflect.DeepEqual(r.Placement, []uint64{1, 2, 7, 4, 5, 6}) || r.Redundancy != objectpb.Redundancy_EC {
				t.Errorf("c: %v", r)
			}
		case "g":
			if r.Version != 80 || r.KeyVersion != 3 {
				t.Errorf("g: %v", r)
			}
		}
	}
	if !reflect.DeepEqual(restored, []string{"a", "b", "c", "g"}) {
		t.Fatalf("restored %v", restored)
	}
	var garbage []uint64
	for _, g := range plan.Garbage {
		garbage = append(garbage, g.Version)
	}
	if !reflect.DeepEqual(garbage, []uint64{30, 55, 75}) {
		t.Fatalf("garbage %v", garbage)
	}
	if plan.Kept != 1 || plan.Unrestorable != 1 || plan.Incomplete != 0 || plan.MaxVersion != 80 || plan.MaxNode != 7 {
		t.Fatalf("plan %s", plan)
	}
}
