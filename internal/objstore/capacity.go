package objstore

import (
	"fmt"
	"math"
	"math/rand"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/direct"
)

// Capacity is where the raw bytes of an SDF-backed chunk store go, per layer.
// The layers add up to Raw.
type Capacity struct {
	Raw base.Bytes
	// SDF layer reservations.
	SDFMeta base.Bytes // the metadata journal zones
	P2L     base.Bytes // the last page of every data block
	Bad     base.Bytes // bad blocks and failed dies
	// Object layer, in whole flash pages.
	ObjectBytes base.Bytes // chunk bytes stored (object bytes, for one REP replica)
	Padding     base.Bytes // the unused tail of every chunk's last page
	SumsRecords base.Bytes // sums files
	Index       base.Bytes // local object index (three copies per blob)
	Other       base.Bytes // any other file
	Free        base.Bytes // usable pages no file maps (free or dead)
	// Counts.
	Blobs, Chunks, SumsFiles int
}

// Live is the bytes the files map.
func (c Capacity) Live() base.Bytes {
	return c.ObjectBytes + c.Padding + c.SumsRecords + c.Index + c.Other
}

// Usable is the data pages of the SDF layer.
func (c Capacity) Usable() base.Bytes { return c.Live() + c.Free }

// StoredFraction is ObjectBytes / Raw now.
func (c Capacity) StoredFraction() float64 { return frac(c.ObjectBytes, c.Raw) }

// ProjectedFraction is the object bytes per raw byte of a device filled
// completely with the same mix: (Usable / Raw) x (ObjectBytes / Live).
func (c Capacity) ProjectedFraction() float64 {
	return frac(c.Usable(), c.Raw) * frac(c.ObjectBytes, c.Live())
}

func frac(a, b base.Bytes) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (c Capacity) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "raw %s: objects %s (%.3f%%), padding %.3f%%, sums records %.3f%%, index %.3f%%, other %.3f%%, free %.3f%%, sdf metadata %.3f%%, P2L %.3f%%, bad %.3f%%; %d blobs, %d chunks, %d sums files; projected full %.3f%%",
		c.Raw, c.ObjectBytes, 100*c.StoredFraction(), 100*frac(c.Padding, c.Raw), 100*frac(c.SumsRecords, c.Raw),
		100*frac(c.Index, c.Raw), 100*frac(c.Other, c.Raw), 100*frac(c.Free, c.Raw), 100*frac(c.SDFMeta, c.Raw),
		100*frac(c.P2L, c.Raw), 100*frac(c.Bad, c.Raw), c.Blobs, c.Chunks, c.SumsFiles, 100*c.ProjectedFraction())
	return b.String()
}

// Capacity accounts every file of the store by layer.
func (s *SDFStore) Capacity() (Capacity, error) {
	st := s.fs.Stats()
	ps := base.Bytes(s.dev.Geometry().PageSize)
	c := Capacity{Raw: st.Raw, SDFMeta: st.MetaReserved, Bad: st.BadBytes}
	c.P2L = st.Raw - st.MetaReserved - st.BadBytes - st.Usable
	blobs := map[string]bool{}
	var live base.Bytes
	for _, name := range s.fs.List() {
		fi, err := s.fs.Stat(name)
		if err != nil {
			return c, fmt.Errorf("sdfstore: %w", err)
		}
		size := base.Bytes(fi.Size)
		pages := (size + ps - 1) / ps * ps
		live += pages
		switch {
		case strings.HasPrefix(name, "d/"):
			c.ObjectBytes += size
			c.Padding += pages - size
			c.Chunks++
			blobs[name[:strings.LastIndex(name, ".")]] = true
		case strings.HasPrefix(name, "k/"):
			c.SumsRecords += pages
			c.SumsFiles++
		case strings.HasPrefix(name, "i/"):
			c.Index += pages
		default:
			c.Other += pages
		}
	}
	c.Blobs = len(blobs)
	c.Free = st.Usable - live
	return c, nil
}

// CapacityMix draws object sizes for capacity measurements: 50% small (4 to
// 64 KiB), 35% medium (64 KiB to 1 MiB), 15% large (1 to 16 MiB), each
// log-uniform, so most objects are small and most bytes are in large ones.
func CapacityMix(rng *rand.Rand) int {
	lo, hi := 4<<10, 64<<10
	switch p := rng.Float64(); {
	case p < 0.15:
		lo, hi = 1<<20, 16<<20
	case p < 0.5:
		lo, hi = 64<<10, 1<<20
	}
	return int(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
}

// FillREP writes REP replicas (shard 0, as one node holds them) of objects
// whose sizes size draws, until the next object would take the store's used
// bytes past fillFraction of its capacity (such objects are skipped; it
// stops after 100 in a row). It returns the objects written and
// their chunk counts.
func FillREP(cs *ChunkStore, rng *rand.Rand, size func(*rand.Rand) int, fillFraction float64) ([]int, error) {
	if fillFraction <= 0 || fillFraction > 0.95 {
		return nil, base.InvalidArgumentf("fill fraction %g outside (0, 0.95]", fillFraction)
	}
	var chunks []int
	buf := make([]byte, direct.ChunkSize)
	misses := 0
	for v := uint64(1); misses < 100; v++ {
		n := size(rng)
		u, err := cs.store.Usage()
		if err != nil {
			return chunks, err
		}
		// Room for the object with every page of its chunks and sums.
		need := base.Bytes(n + (n/direct.ChunkSize+2)*8192)
		if float64(u.UsedBytes+need) > fillFraction*float64(u.CapacityBytes) {
			misses++
			continue
		}
		misses = 0
		obj := rng.Uint64()
		nc := (n + direct.ChunkSize - 1) / direct.ChunkSize
		for i := 0; i < nc; i++ {
			l := min(direct.ChunkSize, n-i*direct.ChunkSize)
			rng.Read(buf[:l])
			id := direct.ChunkID{Object: obj, Version: v, Index: uint32(i)}
			if err := cs.WriteChunk(id, buf[:l], direct.Sums(id, buf[:l]), false); err != nil {
				return chunks, err
			}
		}
		info := BlobInfo{Key: fmt.Sprintf("obj-%d", v), Object: obj, Version: v, Redundancy: "rep", Chunks: uint32(nc)}
		if err := cs.PutBlobInfo(info); err != nil {
			return chunks, err
		}
		chunks = append(chunks, nc)
	}
	return chunks, nil
}
