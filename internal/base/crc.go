package base

import "hash/crc32"

// castagnoli is the one CRC32C table of the module (hardware accelerated on
// amd64 and arm64). NB: it is a package variable only because crc32 hands the
// table out as a pointer; nothing writes to it after initialization.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C (Castagnoli) checksum of data. Every checksum
// flashmend stores on disk or sends with data is a CRC32C.
func CRC32C(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// CRC32CUpdate returns crc extended with data: CRC32CUpdate(CRC32C(a), b) is
// the CRC32C of a followed by b, and CRC32CUpdate(0, b) is CRC32C(b).
func CRC32CUpdate(crc uint32, data []byte) uint32 { return crc32.Update(crc, castagnoli, data) }
