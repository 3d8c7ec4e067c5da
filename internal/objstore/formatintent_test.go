package objstore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
	"github.com/flashmend/flashmend/internal/fsys"
)

// interruptFormat leaves dir as a crash in the middle of the first format
// of a blank device leaves it: some blocks erased (the device is no longer
// blank), no file system that mounts, no formatted marker; with intent the
// format intent marker is there (written before sdf.Format starts).
func interruptFormat(t *testing.T, dir string, g flash.Geometry, intent bool) {
	t.Helper()
	p, err := catalog.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	devDir := filepath.Join(dir, "flash")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if intent {
		if err := writeMarker(fsys.OS{}, filepath.Join(dir, sdfFormattingMarker), "formatting\n"); err != nil {
			t.Fatal(err)
		}
	}
	dev, err := flash.OpenFile(devDir, g, p.Options(flash.TimingNone, nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	for ch := 0; ch < g.Channels; ch++ {
		if err := dev.Erase(flash.BlockAddr{Channel: ch, Die: 0, Block: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashAtSDFZoneEraseDuringFormat: found by the crash-point sweep at
// sdf-zone-erased during a node's first start: a node killed while it
// formatted its blank device never started again ("no format marker and no
// SDF file system that mounts; refusing to format"). The format intent
// marker, written durably before the format, lets the next open run the
// format again; without the intent marker such a device is still refused
// (it may hold someone's data), and a lingering intent beside a formatted
// marker is removed on mount.
func TestCrashAtSDFZoneEraseDuringFormat(t *testing.T) {
	g := smallGeometry()
	opts := SDFStoreOptions{Geometry: g, Seed: 1}

	dir := t.TempDir()
	interruptFormat(t, dir, g, true)
	s, err := OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatalf("open after a format cut short: %v", err)
	}
	if info := s.OpenInfo(); !info.Formatted || !info.FormatResumed {
		t.Fatalf("open after a format cut short: %v, want the format resumed", info)
	}
	if _, err := os.Stat(filepath.Join(dir, sdfFormattingMarker)); !os.IsNotExist(err) {
		t.Fatalf("format intent marker after the format: %v", err)
	}
	cs := NewChunkStore(s)
	id := direct.ChunkID{Object: 7, Version: 1}
	data := bytes.Repeat([]byte("resumed"), 700)
	if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A lingering intent (a crash between the markers' writes) beside the
	// formatted marker: mounted, data kept, intent removed.
	if err := writeMarker(fsys.OS{}, filepath.Join(dir, sdfFormattingMarker), "formatting\n"); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSDFStore(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if info := s.OpenInfo(); info.Formatted || info.FormatResumed {
		t.Fatalf("reopen: %v, want a mount", info)
	}
	if r, err := NewChunkStore(s).ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
		t.Fatalf("chunk after reopen: %s %v", r, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, sdfFormattingMarker)); !os.IsNotExist(err) {
		t.Fatalf("lingering format intent marker not removed: %v", err)
	}

	// The same state without the intent marker is refused.
	dir = t.TempDir()
	interruptFormat(t, dir, g, false)
	if _, err := OpenSDFStore(dir, opts); err == nil || !strings.Contains(err.Error(), "refusing to format") {
		t.Fatalf("state without a format intent: %v, want a refusal", err)
	}
}
