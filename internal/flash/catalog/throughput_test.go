package catalog

import (
	"math"
	"testing"
)

// TestSDFThroughput checks the SDF preset against SDF 002 section 3.2: the
// aggregate raw flash bandwidth of the 44 channels is 1.67 GB/s for reads
// and 1.01 GB/s for writes, and throughput grows linearly with the channels
// used (Figure 7). Virtual time, so exact and deterministic.
func TestSDFThroughput(t *testing.T) {
	p := All()["sdf"]
	one, err := SequentialThroughput(p.Geometry, p.Timing, 1, 2, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	all, err := SequentialThroughput(p.Geometry, p.Timing, 44, 2, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\n%s", one, all)
	if r := all.ReadBytesPerSecond / one.ReadBytesPerSecond; math.Abs(r-44) > 0.01 {
		t.Fatalf("read scaling 1 -> 44 channels is %.3fx, want 44x", r)
	}
	if math.Abs(all.ReadBytesPerSecond/1e9-1.67)/1.67 > 0.03 || math.Abs(all.WriteBytesPerSecond/1e9-1.01)/1.01 > 0.03 {
		t.Fatalf("SDF preset: %s; SDF 002 reports 1.67 GB/s read, 1.01 GB/s write raw", all)
	}
	if _, err := SequentialThroughput(p.Geometry, p.Timing, 45, 1, 8<<20); err == nil {
		t.Fatal("45 channels accepted")
	}
}
