package objstore

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/crashpoint"
	"github.com/flashmend/flashmend/internal/direct"
)

// TestFirstFormatCrashAtEveryStep: a node's first start formats its blank
// device; a crash at any persistence step of that format (every SDF crash
// point, at its first hits and then at doubling hit counts to the last)
// must leave a directory that opens: the format resumed (the intent
// marker) or the file system mounted, never a refusal, and the store then
// takes and returns a chunk, also after a clean reopen. The crash is the
// state of the directory at the hit (copied while the formatting goroutine
// waits in the hook: what a process killed there leaves; the device's
// files take every write at once, so the copy is that state).
func TestFirstFormatCrashAtEveryStep(t *testing.T) {
	g := smallGeometry()
	opts := SDFStoreOptions{Geometry: g, Seed: 1}
	tried := 0
	for _, p := range crashpoint.Points {
		if !strings.HasPrefix(p.Layer, "sdf") {
			continue
		}
		total := int64(0)
		for at := int64(1); ; {
			dir := filepath.Join(t.TempDir(), "store")
			crashed := filepath.Join(t.TempDir(), "crashed")
			var copyErr error
			crashpoint.Arm(crashpoint.Spec{Name: p.Name, At: at}, func(crashpoint.Spec) {
				copyErr = bitrot.Copy(vfs.Default, dir, vfs.Default, crashed)
			})
			s, err := OpenSDFStore(dir, opts)
			hits := crashpoint.Hits()
			crashpoint.Disarm()
			if err != nil {
				t.Fatalf("format with %s armed: %v", p.Name, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if copyErr != nil {
				t.Fatalf("%s@%d: copying the crashed state: %v", p.Name, at, copyErr)
			}
			if total == 0 {
				total = hits
			}
			if hits < at {
				t.Logf("%s: %d hits in a format", p.Name, total)
				break // not reached in a format
			}
			tried++
			checkOpensAfterCrash(t, fmt.Sprintf("%s@%d of %d", p.Name, at, total), crashed, opts)
			switch {
			case at < 4:
				at++
			case at < total:
				at = min(2*at, total)
			default:
				at = total + 1
			}
		}
	}
	if tried < 4 {
		t.Fatalf("only %d crash states of the format tried: the SDF crash points moved out of Format?", tried)
	}
	t.Logf("%d crash states of the first format opened and served", tried)
}

func checkOpensAfterCrash(t *testing.T, what, dir string, opts SDFStoreOptions) {
	t.Helper()
	s, err := OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatalf("%s: open after the crash: %v", what, err)
	}
	id := direct.ChunkID{Object: 11, Version: 1}
	data := bytes.Repeat([]byte(what), 200)
	if err := NewChunkStore(s).WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatalf("%s: write after the crash (%s): %v", what, s.OpenInfo(), err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("%s: close: %v", what, err)
	}
	s, err = OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer s.Close()
	if r, err := NewChunkStore(s).ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("%s: chunk after reopen: %s %v", what, r, err)
	}
}
