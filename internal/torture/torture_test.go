package torture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/experiments"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestMain makes the test binary the KV cells' child process: with
// CellEnv set it runs that one cell and exits.
func TestMain(m *testing.M) {
	if ok, err := RunCellFromEnv(context.Background(), os.Stdout); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestFuzzTargetsListed: FuzzTargets names every Fuzz function of the tree
// (so `torture fuzz` fuzzes each), and each exists.
func TestFuzzTargetsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	re := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	var found []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			found = append(found, "./"+filepath.ToSlash(rel)+" "+m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, ft := range FuzzTargets {
		listed = append(listed, ft.Pkg+" "+ft.Name)
	}
	sort.Strings(found)
	sort.Strings(listed)
	if strings.Join(found, "\n") != strings.Join(listed, "\n") {
		t.Fatalf("fuzz targets in the tree:\n%s\n\nlisted in FuzzTargets:\n%s", strings.Join(found, "\n"), strings.Join(listed, "\n"))
	}
}

func TestParseFuzzOutput(t *testing.T) {
	out := `fuzz: elapsed: 0s, gathering baseline coverage: 0/26 completed
fuzz: elapsed: 3s, execs: 12034 (4011/sec), new interesting: 2 (total: 28)
fuzz: elapsed: 5s, execs: 20117 (4021/sec), new interesting: 3 (total: 29)
--- FAIL: FuzzX (0.02s)
    --- FAIL: FuzzX (0.00s)
        x_fuzz_test.go:41: damaged record decoded
    Failing input written to testdata/fuzz/FuzzX/0123abcd
`
	r := parseFuzzOutput(out)
	if r.Execs != 20117 || r.New != 3 || !r.Failed || r.Failure != "testdata/fuzz/FuzzX/0123abcd: x_fuzz_test.go:41: damaged record decoded" {
		t.Fatalf("parsed %+v", r)
	}
}

// TestKVCordsSlice is the seeded slice of the KV CORDS table in `go test`:
// one fault per file kind of replica n1, drawn from the seed (printed),
// each cell in a child process (this test binary). Every cell must meet
// the target: never lost, wrong, crashed or left unavailable. Write
// errors are in it since the engine fail-stops its replica on a fatal
// write error (MANIFEST, marker, directory sync) instead of the process.
func TestKVCordsSlice(t *testing.T) {
	runKVSlice(t, "", "the store")
}

func TestClassifyKV(t *testing.T) {
	for _, tc := range []struct {
		cell experiments.KVSweepCell
		io   bool
		want Outcome
	}{
		{experiments.KVSweepCell{Converged: true, Outcome: "nothing needed", What: "zeroed [0,4096)"}, false, Correct},
		{experiments.KVSweepCell{Converged: true, Outcome: "repaired (1 patches, 0 raft entries from peers)"}, false, Repaired},
		{experiments.KVSweepCell{Converged: true, Outcome: "nothing needed", DuringErrors: 3, Injected: 9}, true, Recovered},
		{experiments.KVSweepCell{Converged: true, Outcome: "nothing needed", Injected: 0}, true, NotReached},
		{experiments.KVSweepCell{Converged: true, Missing: 1}, false, Lost},
		{experiments.KVSweepCell{Converged: true, Wrong: 1, Missing: 1}, false, Wrong},
		{experiments.KVSweepCell{StartErr: "boom"}, false, Unavailable},
		{experiments.KVSweepCell{Converged: false, Outcome: "nothing needed"}, false, Unavailable},
		{experiments.KVSweepCell{Converged: true, What: "not applicable: LOCK holds no byte"}, true, NotApplicable},
	} {
		if got, _ := ClassifyKV(tc.cell, tc.io); got != tc.want {
			t.Errorf("%+v (io %v): %s, want %s", tc.cell, tc.io, got, tc.want)
		}
	}
}

// TestKVFlashCordsSlice is the seeded slice of the KV CORDS table on
// emulated flash in `go test`: each node's replicas on sdfvfs over SDF
// over its own file-backed device; one fault per row (file kinds of
// replica n1's device and the SDF layer's journal, P2L and OOB pages),
// drawn from the seed (printed), each cell in a child process. Every cell
// must meet the target.
func TestKVFlashCordsSlice(t *testing.T) {
	runKVSlice(t, StoreSDF, "the device")
}

// runKVSlice runs one fault per file kind of the KV CORDS table on store
// (faults drawn from the seed, printed; FLASHMEND_TORTURE_SEED and
// FLASHMEND_TORTURE_FAULTS repeat or narrow a run), each cell in a child
// process, and fails on every cell that misses the target; where names
// what holds the files, for the message when too few kinds ran.
func runKVSlice(t *testing.T, store, where string) {
	seed := testseed.Seed(t, "FLASHMEND_TORTURE_SEED")
	faults := experiments.KVCordsFaults
	if f := os.Getenv("FLASHMEND_TORTURE_FAULTS"); f != "" {
		faults = strings.Split(f, ",")
	}
	pick := map[string]string{}
	i := 0
	cells, err := RunKV(context.Background(), KVOptions{Keys: 200, Seed: seed, Store: store, Argv: []string{os.Args[0]},
		CellTimeout: 3 * time.Minute, Tmp: t.TempDir(), Logf: t.Logf,
		Cell: func(kind, fault string) bool {
			if _, ok := pick[kind]; !ok {
				pick[kind] = faults[(int(seed%int64(len(faults)))+i)%len(faults)]
				i++
			}
			return pick[kind] == fault
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) < 5 {
		t.Fatalf("%d cells ran: %s has fewer file kinds than expected", len(cells), where)
	}
	for _, c := range cells {
		if c.Outcome.Bad() {
			t.Errorf("%s / %s on %s: %s: %s", c.Kind, c.Params.Fault, c.Params.File, c.Outcome, c.Reason)
		}
	}
}

// runCells runs the named (kind, fault) cells of the KV table on store and
// fails on each that did not land (not reached) or missed the target; it
// returns the cells by "kind/fault".
func runCells(t *testing.T, store string, want ...string) map[string]KVCell {
	seed := testseed.Seed(t, "FLASHMEND_TORTURE_SEED")
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
	}
	cells, err := RunKV(context.Background(), KVOptions{Keys: 200, Seed: seed, Store: store, Argv: []string{os.Args[0]},
		CellTimeout: 3 * time.Minute, Tmp: t.TempDir(), Logf: t.Logf,
		Cell: func(kind, fault string) bool { return wanted[kind+"/"+fault] }})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]KVCell{}
	for _, c := range cells {
		got[c.Kind+"/"+c.Params.Fault] = c
		if c.Outcome.Bad() || c.Outcome == NotReached {
			t.Errorf("%s / %s on %s: %s: %s", c.Kind, c.Params.Fault, c.Params.File, c.Outcome, c.Reason)
		}
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("no cell %s ran (rows: the kinds of the stored cluster)", w)
		}
	}
	return got
}

// The CORDS write-error cells of Pebble's OPTIONS file and of guardfs's
// copies were never reached: Pebble writes OPTIONS as
// "temporary.<n>.dbtmp" and renames it, and each guardfs copy's kind
// carried its file's number (".guardfs *.OPTIONS-000008"), so the fault,
// matching by kind, never met the files written after it. bitrot.Kind
// now names both by what they hold.
func TestCordsWriteErrorsNeverReachedOptionsOrGuardfsCopies(t *testing.T) {
	runCells(t, "", "pebble OPTIONS/write-error", ".guardfs pebble OPTIONS/write-error", ".guardfs pebble MANIFEST/write-error")
}

// Cells of the flash table that were never reached: a P2L page is read
// only when a die's data is identified (now done under the fault, and it
// must list what the file-table scan lists); the P2L write error armed one
// zone the workload did not fill (now every data zone not full); the
// device's state copies are saved when it closes, after the fault was
// cleared (now the fault lasts through n1's stop, and n1's restart is
// fault-free); the lost write of a guardfs copy picked a copy the second
// load had not written (now the last one it did).
func TestFlashCordsCellsNeverReached(t *testing.T) {
	got := runCells(t, StoreSDF, "sdf P2L pages/eio-read-4k", "sdf P2L pages/write-error",
		"flash device state (state.0-2)/write-error", ".guardfs pebble MANIFEST/lost-write-4k")
	if c, ok := got["sdf P2L pages/eio-read-4k"]; ok && !strings.Contains(c.Reason, "the same") {
		t.Errorf("P2L read under the fault: %s", c.Reason)
	}
}
