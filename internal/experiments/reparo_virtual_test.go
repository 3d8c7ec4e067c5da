package experiments

import (
	"testing"

	"github.com/flashmend/flashmend/internal/reparo"
)

// TestVirtualRebuildSmall runs the virtual-time die repair on a small
// device and checks what must hold whatever the timing: the three
// identifiers agree and find exactly the die's pages (the fill seals every
// zone it takes, so die ch0/d1 holds every data page of its block in each of
// channel 0's filled zones), reparo writes the die's data (plus, under CDR,
// the fake failures) and reads it seven times from the RAID peers, the
// baseline writes the device's, and reparo takes less time than the
// baseline.
func TestVirtualRebuildSmall(t *testing.T) {
	g := virtualGeometry(4, 64)
	run, err := virtualRebuildOnce(4, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !run.agree {
		t.Fatal("identifiers disagree")
	}
	w := fillVirtual(g)
	var want int64
	for _, z := range w.t.Data() {
		if z.Channel == 0 && z.WP > 0 {
			want += int64(w.l.DataPagesPerBlock()) * int64(g.PageSize)
		}
	}
	if run.lost != want {
		t.Fatalf("lost %d bytes, the die held %d", run.lost, want)
	}
	if got := run.repair[reparo.IdentifyIDR].bytesWritten; got != run.lost {
		t.Fatalf("reparo IDR wrote %d, lost %d", got, run.lost)
	}
	// RAID-5 of 8: every lost page is rebuilt from 7 reads.
	if got := run.repair[reparo.IdentifyIDR].bytesRead; got != 7*run.lost {
		t.Fatalf("reparo IDR read %d, lost %d", got, run.lost)
	}
	if cdr := run.repair[reparo.IdentifyCDR]; cdr.bytesWritten <= run.lost || cdr.rebalance <= 0 {
		t.Fatalf("reparo CDR moved no fake failures: %+v", cdr)
	}
	if run.baseline.bytesWritten < run.live {
		t.Fatalf("baseline wrote %d of %d live", run.baseline.bytesWritten, run.live)
	}
	for _, m := range reparo.Methods {
		if r := run.repair[m]; r.total() <= 0 || r.total() >= run.baseline.total() {
			t.Fatalf("%s: %+v against baseline %+v", m, r, run.baseline)
		}
	}
}
