package objstore_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/fsys"
	. "github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
)

// An SDFStore's device is power-safe unless PowerUnsafe says otherwise,
// and its open info says so when it is not.
func TestSDFStorePowerSafeByDefault(t *testing.T) {
	for _, unsafe := range []bool{false, true} {
		s, err := OpenSDFStore(t.TempDir(), SDFStoreOptions{PowerUnsafe: unsafe})
		if err != nil {
			t.Fatal(err)
		}
		info := s.OpenInfo()
		if info.PowerSafe == unsafe {
			t.Errorf("PowerUnsafe %v: open info says PowerSafe %v", unsafe, info.PowerSafe)
		}
		if strings.Contains(info.String(), "UNSAFE") != unsafe {
			t.Errorf("PowerUnsafe %v: open info %q", unsafe, info)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkWriteChunk is a node's chunk write path (data and sums record)
// on the SDF store over a file-backed emulated device in the test's
// temporary directory, with the device's power-safe fsyncs (the default)
// and without (PowerUnsafe), next to the plain-file store with and without
// its fsyncs (node.Config.SyncWrites, on in every node): what "nothing
// acknowledged is lost through a power loss" costs on this disk.
//
//	go test ./internal/objstore -run '^$' -bench WriteChunk -count 5
func BenchmarkWriteChunk(b *testing.B) {
	stores := []struct {
		name string
		open func(dir string) (Store, error)
	}{
		{"sdf/powersafe", func(dir string) (Store, error) { return OpenSDFStore(dir, SDFStoreOptions{}) }},
		{"sdf/unsafe", func(dir string) (Store, error) { return OpenSDFStore(dir, SDFStoreOptions{PowerUnsafe: true}) }},
		{"file/sync", func(dir string) (Store, error) { return filestore.Open(dir, true) }},
		{"file/nosync", func(dir string) (Store, error) { return filestore.Open(dir, false) }},
	}
	for _, size := range []int{4 << 10, direct.ChunkSize} {
		for _, st := range stores {
			b.Run(fmt.Sprintf("size=%dKiB/%s", size>>10, st.name), func(b *testing.B) {
				s, err := st.open(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				cs := NewChunkStore(s)
				data := make([]byte, size)
				for i := range data {
					data[i] = byte(i * 7)
				}
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					// 64 chunk names, rewritten: the device's zones are
					// reclaimed as they would be under a steady load.
					id := direct.ChunkID{Object: 1, Version: 1, Index: uint32(i % 64)}
					if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A node's first start on a blank directory cut at every file-system
// operation (the device's first state save, SDF's format, the markers),
// as a power loss keeping only what was synced and as a process crash:
// the store opens from what is left, formatted, and stores and reads a
// chunk. Found by torture powerloss --store sdf: a cut while the new
// device saved its first state left a device with state, no file system
// and no format intent, refused at every start ("no format marker ... and
// no SDF file system that mounts").
func TestSDFStoreFirstOpenCutAtEveryOperation(t *testing.T) {
	g := flash.Geometry{Channels: 2, DiesPerChannel: 2, BlocksPerDie: 24, PagesPerBlock: 16, PageSize: 4096, OOBSize: 128}
	open := func(m *fsys.Mem) (*SDFStore, error) {
		return OpenSDFStore("/node/sdf", SDFStoreOptions{Geometry: g, Seed: 1, FS: m})
	}
	dry := fsys.NewMem()
	s, err := open(dry)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ops := dry.Ops()
	id := direct.ChunkID{Object: 7, Version: 1}
	data := []byte("a chunk written after the restart")
	for at := int64(1); at <= ops; at++ {
		for _, keep := range []int{0, 100} {
			m := fsys.NewMem()
			var img *fsys.Mem
			m.SetHook(func(op fsys.Op) {
				if op.N == at {
					img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: rand.New(rand.NewSource(at))})
				}
			})
			if s, err := open(m); err == nil {
				_ = s.Close()
			}
			if img == nil {
				// The open made fewer operations than the dry run (SDF's
				// channel workers interleave): cut at its end.
				img = m.Crash(fsys.CrashConfig{KeepPercent: keep, Rand: rand.New(rand.NewSource(at))})
			}
			s, err := open(img)
			if err != nil {
				t.Fatalf("cut at operation %d of %d keeping %d%%: %v", at, ops, keep, err)
			}
			cs := NewChunkStore(s)
			if err := cs.WriteChunk(id, data, direct.Sums(id, data), false); err != nil {
				t.Fatalf("cut at operation %d keeping %d%%: write after the restart: %v", at, keep, err)
			}
			if r, err := cs.ReadChunk(id); err != nil || r.Corrupt || !bytes.Equal(r.Data, data) {
				t.Fatalf("cut at operation %d keeping %d%%: read after the restart: %s %v", at, keep, r, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("%d operations of a first open, each cut twice", ops)
}
