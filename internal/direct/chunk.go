package direct

import (
	"encoding/binary"
	"fmt"

	"github.com/flashmend/flashmend/internal/base"
)

// Chunk geometry (DIRECT 000 section 4.2.2: HDFS checksums every 512 B and
// streams, and so repairs, 64 KiB at a time).
const (
	ChunkSize  = 64 * 1024
	SectorSize = 512
	// SectorsPerChunk is the number of checksums of a full chunk.
	SectorsPerChunk = ChunkSize / SectorSize
)

// ChunkID is the identity of one stored chunk. It is mixed into every
// checksum so that a chunk written to the wrong place does not verify.
type ChunkID struct {
	Object  uint64 // FNV-1a hash of the object key
	Version uint64 // the object version (unique cluster-wide)
	Shard   uint32 // 0 for REP; 0..5 for EC shards
	Index   uint32 // chunk index within the replica or shard
}

func (c ChunkID) String() string {
	return fmt.Sprintf("o%016x/v%d/s%d/c%d", c.Object, c.Version, c.Shard, c.Index)
}

// Identity is the 24-byte encoding mixed into checksums.
func (c ChunkID) Identity() [24]byte {
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], c.Object)
	binary.LittleEndian.PutUint64(b[8:], c.Version)
	binary.LittleEndian.PutUint32(b[16:], c.Shard)
	binary.LittleEndian.PutUint32(b[20:], c.Index)
	return b
}

// SectorCount is the number of 512 B sectors (the last one possibly short)
// in a chunk of n bytes.
func SectorCount(n int) int { return (n + SectorSize - 1) / SectorSize }

// Sums computes the per-sector checksums of a chunk: sector s's checksum is
// CRC32C(identity || s || sector bytes).
func Sums(id ChunkID, data []byte) []uint32 { return SumsFrom(id, 0, data) }

// SumsFrom computes the checksums of data taken as the chunk's sectors from
// sector first on (data starts at byte first*SectorSize of the chunk): they
// equal Sums(id, chunk)[first:first+SectorCount(len(data))], so a sector
// range fetched alone verifies against the stored sums of those sectors
// (the die repair fetches only the lost sectors, see Span).
func SumsFrom(id ChunkID, first int, data []byte) []uint32 {
	ident := id.Identity()
	seed := base.CRC32C(ident[:])
	sums := make([]uint32, SectorCount(len(data)))
	var idx [4]byte
	for s := range sums {
		end := min((s+1)*SectorSize, len(data))
		binary.LittleEndian.PutUint32(idx[:], uint32(first+s))
		c := base.CRC32CUpdate(seed, idx[:])
		sums[s] = base.CRC32CUpdate(c, data[s*SectorSize:end])
	}
	return sums
}

// BadSectors returns the indexes of the sectors of data that do not match
// sums. A length mismatch makes every sector bad.
func BadSectors(id ChunkID, data []byte, sums []uint32) []int {
	return BadSectorsFrom(id, 0, data, sums)
}

// BadSectorsFrom is BadSectors for data starting at sector first of the
// chunk, against the sums of those sectors; the indexes returned count from
// the start of data.
func BadSectorsFrom(id ChunkID, first int, data []byte, sums []uint32) []int {
	got := SumsFrom(id, first, data)
	if len(got) != len(sums) {
		bad := make([]int, max(len(got), len(sums)))
		for i := range bad {
			bad[i] = i
		}
		return bad
	}
	var bad []int
	for i := range got {
		if got[i] != sums[i] {
			bad = append(bad, i)
		}
	}
	return bad
}

// Verify reports nil when data matches sums, and a corruption error naming
// the first bad sector otherwise.
func Verify(id ChunkID, data []byte, sums []uint32) error { return VerifyFrom(id, 0, data, sums) }

// VerifyFrom is Verify for data starting at sector first of the chunk,
// against the sums of those sectors.
func VerifyFrom(id ChunkID, first int, data []byte, sums []uint32) error {
	if len(sums) == 0 && len(data) == 0 {
		return nil
	}
	if bad := BadSectorsFrom(id, first, data, sums); len(bad) > 0 {
		return base.CorruptionErrorf("chunk %s: %d of %d sectors from sector %d fail their checksum (first %d)",
			id, len(bad), len(sums), first, first+bad[0])
	}
	return nil
}
