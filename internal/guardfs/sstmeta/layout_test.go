package sstmeta_test

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/guardfs/guardtest"
	"github.com/flashmend/flashmend/internal/guardfs/sstmeta"
)

// TestLayoutRegionsVerify: the regions of a real sstable are sorted, lie
// inside it, end with the footer, and read back verified; a flipped byte in
// a block fails its trailer checksum as corruption, never as data.
func TestLayoutRegionsVerify(t *testing.T) {
	fs := vfs.NewMem()
	opts := guardtest.PebbleOptions(t, vfs.NewMem())
	f, err := fs.Create("t.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), opts.MakeWriterOptions(0, sstable.TableFormatPebblev5))
	for i := 0; i < 3000; i++ {
		if err := w.Set([]byte(guardtest.KeyOf(i)), guardtest.ValueOf(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := guardtest.ReadFile(fs, "t.sst")
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	open := func() vfs.File {
		r, err := fs.Open("t.sst")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	table, err := fs.Open("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	l, err := sstmeta.ReadLayout(opts.MakeReaderOptions(), table, size) // closes table
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Regions) < 3 {
		t.Fatalf("%d regions: %v", len(l.Regions), l.Regions)
	}
	last := l.Regions[len(l.Regions)-1]
	if last.Block || last.Off+last.Len != size {
		t.Fatalf("last region %s (block %t) is not the footer ending at %d", last, last.Block, size)
	}
	r := open()
	var firstBlock *sstmeta.Region
	for i, reg := range l.Regions {
		if i > 0 && reg.Off < l.Regions[i-1].Off+l.Regions[i-1].Len {
			t.Fatalf("region %s overlaps %s", reg, l.Regions[i-1])
		}
		got, err := l.VerifiedBytes(r, reg)
		if err != nil || !bytes.Equal(got, data[reg.Off:reg.Off+reg.Len]) {
			t.Fatalf("region %s: %v", reg, err)
		}
		if reg.Block && firstBlock == nil {
			firstBlock = &l.Regions[i]
		}
	}
	if firstBlock == nil {
		t.Fatal("no block region")
	}
	damaged := bytes.Clone(data)
	damaged[firstBlock.Off] ^= 0x10
	if err := guardtest.WriteFile(fs, "t.sst", damaged); err != nil {
		t.Fatal(err)
	}
	if got, err := l.VerifiedBytes(open(), *firstBlock); !base.IsCorruption(err) || got != nil {
		t.Fatalf("damaged block %s: %d bytes, %v; want a corruption", *firstBlock, len(got), err)
	}
}
