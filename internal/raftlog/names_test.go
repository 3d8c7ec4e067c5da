package raftlog

import (
	"testing"

	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// TestGenerationCopiesAreSiblingsOnFlash: on emulated flash the two copies
// of a generation are kept on channels apart because sdfvfs recognizes
// their names (sdfvfs.DefaultSiblingCopy); a change of fileName here must
// keep that.
func TestGenerationCopiesAreSiblingsOnFlash(t *testing.T) {
	for _, gen := range []uint64{1, 42, 999999} {
		var groups [copies]string
		for i := 0; i < copies; i++ {
			for _, name := range []string{fileName(gen, i), fileName(gen, i) + tmpSuffix} {
				g, idx, ok := sdfvfs.DefaultSiblingCopy("kv/r1/raft/" + name)
				if !ok || idx != i {
					t.Fatalf("%s: sibling %q %d %v, want copy %d", name, g, idx, ok, i)
				}
				groups[i] = g
			}
		}
		if groups[0] != groups[1] {
			t.Fatalf("generation %d: copies in groups %q and %q", gen, groups[0], groups[1])
		}
	}
}
