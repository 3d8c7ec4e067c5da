package direct

import (
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/base"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// TestDecideGolden runs the script testdata/decide.txt: each command line
// names the replicas' (or shards') conditions; the expected output, the
// reads issued and the decision, follows it. Run with -update to rewrite
// the file after a deliberate change.
//
// Commands:
//
//	rep S0 S1 S2        a REP chunk of 64 KiB
//	ec S0 S1 S2 S3 S4 S5  an EC row of 4 KiB per shard
//
// Conditions: good, flipA (bit 100), flipC (bit 101) and flipD (bit 4000)
// in the same sector, flipB
// (bit 9000), flipA2 (bits 100 and 40000), down, sumsbad (data fine, sums
// record corrupt), short.
func TestDecideGolden(t *testing.T) {
	const path = "testdata/decide.txt"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "rep ") && !strings.HasPrefix(line, "ec ") && !strings.HasPrefix(line, "#") && line != "" {
			continue // an expected-output line: regenerated below
		}
		if line == "" {
			continue
		}
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "#") {
			continue
		}
		out.WriteString(runScriptLine(t, line))
	}
	if *update {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := out.String(); got != string(b) {
		t.Fatalf("%s differs (run with -update after checking):\n%s", path, got)
	}
}

func parseState(t *testing.T, s string) replicaState {
	for st := replicaState(0); st < numStates; st++ {
		if st.String() == s || (s == "down" && st == stUnavailable) {
			return st
		}
	}
	t.Fatalf("unknown condition %q", s)
	return 0
}

func runScriptLine(t *testing.T, line string) string {
	fields := strings.Fields(line)
	var states []replicaState
	for _, f := range fields[1:] {
		states = append(states, parseState(t, f))
	}
	var b strings.Builder
	describe := func(d Decision) {
		switch {
		case d.Err == nil:
			fmt.Fprintf(&b, "  => %s\n", d)
		case base.IsDataLoss(d.Err):
			b.WriteString("  => error: data loss\n")
		case errors.Is(d.Err, ErrUnavailable):
			b.WriteString("  => error: unavailable\n")
		default:
			fmt.Fprintf(&b, "  => error: %v\n", d.Err)
		}
	}
	switch fields[0] {
	case "rep":
		id := ChunkID{Object: 1, Version: 1}
		data := make([]byte, ChunkSize)
		rand.New(rand.NewSource(1)).Read(data)
		reads := make([]ReplicaRead, len(states))
		for {
			d := DecideREP(id, len(data), reads)
			if len(d.Fetch) == 0 {
				describe(d)
				break
			}
			for _, i := range d.Fetch {
				reads[i] = makeRead(states[i], id, data)
				fmt.Fprintf(&b, "  read replica %d: %s\n", i, states[i])
			}
		}
	case "ec":
		if len(states) != TotalShards {
			t.Fatalf("%q: want %d shards", line, TotalShards)
		}
		enc := NewEncoder()
		shards := make([][]byte, TotalShards)
		rng := rand.New(rand.NewSource(2))
		for s := range shards {
			shards[s] = make([]byte, 4096)
			if s < DataShards {
				rng.Read(shards[s])
			}
		}
		if err := enc.Encode(shards); err != nil {
			t.Fatal(err)
		}
		var ids [TotalShards]ChunkID
		for s := range ids {
			ids[s] = ChunkID{Object: 1, Version: 1, Shard: uint32(s)}
		}
		var reads [TotalShards]ReplicaRead
		for {
			d := DecideEC(enc, ids, 4096, reads)
			if len(d.Fetch) == 0 {
				describe(d)
				break
			}
			for _, s := range d.Fetch {
				reads[s] = makeRead(states[s], ids[s], shards[s])
				fmt.Fprintf(&b, "  read shard %d: %s\n", s, states[s])
			}
		}
	}
	return b.String()
}
