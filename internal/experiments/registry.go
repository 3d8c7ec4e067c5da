package experiments

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/flashmend/flashmend/internal/report"
)

// Config is what every experiment receives.
type Config struct {
	Seed  int64 // for every random choice the experiment makes
	Quick bool  // a seconds-long version, for tests and smoke runs
}

// Experiment is one registered experiment.
type Experiment struct {
	Name        string // also the report's file stem
	Description string
	Run         func(ctx context.Context, cfg Config) (*report.Report, error)
}

// Command is the command line that reproduces an experiment's report.
func Command(name string, cfg Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go run ./cmd/flashmend experiments run %s --out docs/results", name)
	if cfg.Seed != DefaultSeed {
		fmt.Fprintf(&b, " --seed %d", cfg.Seed)
	}
	if cfg.Quick {
		b.WriteString(" --quick")
	}
	return b.String()
}

// DefaultSeed is the seed of the committed reports.
const DefaultSeed = 1

// All returns every registered experiment, sorted by name. Experiments
// returned by one call may share work (the Chameleon figures share their
// simulation runs).
func All() []Experiment {
	memo := newSimMemo()
	all := []Experiment{
		modelDirect(),
		sdfBench(),
		sdfvfsWriteAmplification(),
		kvYCSBCorruption(),
		kvRecoveryLatency(),
		kvPatchSize(),
		directReadErrors(),
		directThroughput(),
		directRepairLatency(),
		objstoreCapacity(),
		uberRestartKV(),
		kvFaultSweep(),
		uberRestartObjects(),
		singleFaultObjects(),
		chameleonWear(memo),
		chameleonEndurance(memo),
		chameleonLatency(memo),
		chameleonWA(memo),
		chameleonStates(memo),
		chameleonScaleExp(),
		chameleonLive(),
		reparoIdentifier(),
		reparoRebuild(),
		reparoAfter(),
		datapath(),
		kvThroughput(),
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// LookupAll returns the experiments called names, from one All() so that
// they share work.
func LookupAll(names []string) ([]Experiment, error) {
	all := All()
	var out []Experiment
	for _, name := range names {
		found := false
		for _, e := range all {
			if e.Name == name {
				out = append(out, e)
				found = true
			}
		}
		if !found {
			_, err := Lookup(name)
			return nil, err
		}
	}
	return out, nil
}

// Lookup returns the experiment called name.
func Lookup(name string) (Experiment, error) {
	var names []string
	for _, e := range All() {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Experiment{}, fmt.Errorf("unknown experiment %q (have: %s)", name, strings.Join(names, ", "))
}
