package torture

import (
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/report"
	"github.com/flashmend/flashmend/internal/torture/powerloss"
)

// torture.md has a power-loss section with a row per store run, linking
// its report, and a failed or unfinished run counts against the harness.
func TestPowerLossSection(t *testing.T) {
	var r Run
	for _, store := range []string{powerloss.StoreFile, powerloss.StoreSDF} {
		res, err := powerloss.Run(powerloss.Options{Seed: 3, Store: store, Workloads: 1, Steps: 3, CrashesPerWorkload: 2})
		if err != nil {
			t.Fatal(err)
		}
		r.PowerLoss = append(r.PowerLoss, res)
	}
	rep, err := r.Report()
	if err != nil {
		t.Fatal(err)
	}
	md := string(rep.Markdown(report.Env{}))
	for _, want := range []string{"## Power loss (", "[powerloss-file.md](powerloss-file.md)", "[powerloss-sdf.md](powerloss-sdf.md)", "| file | 1 x 3 | 2 drawn per workload and mode | 8 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("torture.md lacks %q", want)
		}
	}
	if n := r.HarnessBad(); n != 0 {
		t.Fatalf("passing power-loss runs count %d against the harness", n)
	}
	r.PowerLossErr = []string{"sdf: it broke"}
	if n := r.HarnessBad(); n != 1 {
		t.Fatalf("an unfinished power-loss run counts %d", n)
	}
	if md := string(func() *report.Report { rep, _ := r.Report(); return rep }().Markdown(report.Env{})); !strings.Contains(md, "ERROR: sdf: it broke") {
		t.Fatal("torture.md does not show the unfinished run")
	}
}
