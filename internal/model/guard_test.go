package model

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var updateGuard = flag.Bool("update-guard", false, "rewrite testdata/guard.golden")

func TestGuardFramedLoss(t *testing.T) {
	// One copy: any flip in any stored byte of a frame loses it, so the
	// loss is 1 - (1-u)^(8 * (L + frames*H)).
	p := GuardParams{UBER: 1e-6, FileBytes: 10_000, FrameBytes: 512, HeaderBytes: 28, Copies: 1}
	frames := int64(20) // 19 whole and one of 272 bytes
	want := -math.Expm1(float64(8*(p.FileBytes+frames*p.HeaderBytes)) * math.Log1p(-p.UBER))
	if got := GuardFramedLoss(p); math.Abs(got-want) > 1e-12*want {
		t.Fatalf("one copy: got %g want %g", got, want)
	}
	// Leading order for N copies: frames * (8 (F+H) u)^N.
	p = GuardParams{UBER: 1e-9, FileBytes: 1 << 20, FrameBytes: 512, HeaderBytes: 28, Copies: 3}
	lead := float64(p.FileBytes/p.FrameBytes) * math.Pow(8*540*p.UBER, 3)
	if got := GuardFramedLoss(p); math.Abs(got-lead) > 1e-4*lead {
		t.Fatalf("leading order: got %g want %g", got, lead)
	}
	// More copies, smaller frames, lower UBER: less loss.
	base := GuardParams{UBER: 1e-7, FileBytes: 1 << 20, FrameBytes: 512, HeaderBytes: 28, Copies: 2}
	for _, q := range []GuardParams{
		{UBER: 1e-8, FileBytes: 1 << 20, FrameBytes: 512, HeaderBytes: 28, Copies: 2},
		{UBER: 1e-7, FileBytes: 1 << 20, FrameBytes: 256, HeaderBytes: 28, Copies: 2},
		{UBER: 1e-7, FileBytes: 1 << 20, FrameBytes: 512, HeaderBytes: 28, Copies: 3},
		{UBER: 1e-7, FileBytes: 1 << 19, FrameBytes: 512, HeaderBytes: 28, Copies: 2},
	} {
		if !(GuardFramedLoss(q) < GuardFramedLoss(base)) {
			t.Errorf("%s: %g not below %s: %g", q, GuardFramedLoss(q), base, GuardFramedLoss(base))
		}
	}
	if GuardFramedLoss(GuardParams{UBER: 1e-7, FileBytes: 0, FrameBytes: 512, Copies: 2}) != 0 {
		t.Error("an empty file loses something")
	}
	for _, bad := range []GuardParams{
		{UBER: -1, FileBytes: 1, FrameBytes: 1, Copies: 1},
		{UBER: 0.1, FileBytes: 1, FrameBytes: 0, Copies: 1},
		{UBER: 0.1, FileBytes: 1, FrameBytes: 1, Copies: 0},
		{UBER: 0.1, FileBytes: -1, FrameBytes: 1, Copies: 1},
	} {
		if bad.Validate() == nil || !math.IsNaN(GuardFramedLoss(bad)) {
			t.Errorf("%s validated", bad)
		}
	}
}

func TestGuardSealedLoss(t *testing.T) {
	// Leading order at low UBER: each frame is lost when the sstable's
	// bytes and the K sidecar copies all fail: frames * d(F) q(F+H)^K,
	// plus the structure lost in every copy with any damage: the second
	// term is of higher order in frames * F.
	p := GuardParams{UBER: 1e-10, FileBytes: 1 << 20, FrameBytes: 512, HeaderBytes: 28, Copies: 3}
	frames := float64(p.FileBytes / p.FrameBytes)
	lead := frames * (8 * 512 * p.UBER) * math.Pow(8*540*p.UBER, 2)
	if got := GuardSealedLoss(p, 0); math.Abs(got-lead) > 1e-4*lead {
		t.Fatalf("leading order: got %g want %g", got, lead)
	}
	// A structure frame adds about q^K * d(FileBytes).
	withStruct := GuardSealedLoss(p, 100)
	extra := math.Pow(8*540*p.UBER, 2) * 8 * float64(p.FileBytes) * p.UBER
	if got := withStruct - GuardSealedLoss(p, 0); math.Abs(got-extra) > 1e-3*extra {
		t.Fatalf("structure term: got %g want %g", got, extra)
	}
	// Copies=1 and Copies=2 both keep one sidecar copy.
	p1, p2 := p, p
	p1.Copies, p2.Copies = 1, 2
	if GuardSealedLoss(p1, 100) != GuardSealedLoss(p2, 100) {
		t.Fatal("one sidecar copy either way")
	}
	if !math.IsNaN(GuardSealedLoss(p, -1)) {
		t.Fatal("negative structure size")
	}
}

// TestGuardGolden pins the table in internal/guardfs/doc.go (go test
// ./internal/model -run TestGuardGolden -update-guard).
func TestGuardGolden(t *testing.T) {
	var b bytes.Buffer
	ubers := []float64{1e-8, 1e-7, 1e-6}
	framed, err := GuardTable("guardfs framed files (512 B frames, 28 B headers): P(some byte lost in every copy)",
		512, 28, []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20}, ubers, []int{1, 2, 3}, false)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := GuardTable("guardfs sstable metadata (the sstable + Copies-1 sidecar copies, 32 ranges): P(some metadata byte unreadable)",
		512, 28, []int64{64 << 10, 1 << 20}, ubers, []int{2, 3}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTables(&b, FormatText, []Table{framed, sealed}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "guard.golden")
	if *updateGuard {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("table changed:\n%s\nwant:\n%s", b.Bytes(), want)
	}
}
