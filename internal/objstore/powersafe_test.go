package objstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/direct"
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
