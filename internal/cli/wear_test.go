package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/gen/coordpb"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestDevWear runs `flashmend dev --wear-policy chameleon` on emulated
// flash and reads the balancer with `flashmend ctl wear`.
func TestDevWear(t *testing.T) {
	o := devOptions{dir: t.TempDir(), nodes: 6, store: "sdf", readMode: "direct", maxObject: base.MiB, deviceSize: 64 * base.MiB}
	o.scrub.off = true
	o.wear = wearFlags{policy: "chameleon", epoch: 200 * time.Millisecond, moves: 200 * time.Millisecond}
	ep := startDevForTest(t, o)
	ctl := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"ctl", "--endpoint", ep}, args...), &out, &errOut); code != 0 {
			t.Fatalf("ctl %v: exit %d: %s %s", args, code, out.String(), errOut.String())
		}
		return out.String()
	}
	file := filepath.Join(t.TempDir(), "obj")
	if err := os.WriteFile(file, bytes.Repeat([]byte("wear "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		ctl("put", k, file)
	}
	// The policy starts objects as EC, whatever the put asked.
	if out := ctl("stat", "a"); !strings.Contains(out, " ec") {
		t.Fatalf("stat: %s", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := ctl("wear")
		if testing.Verbose() {
			t.Log(out)
		}
		if strings.Contains(out, "policy chameleon (initial ec)") && strings.Contains(out, "erase counts: mean") &&
			strings.Contains(out, "EC        3") && !strings.Contains(out, "epoch 0 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ctl wear:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWearThroughBinary runs the built binary as an operator would: `flashmend
// dev --wear-policy chameleon` on emulated flash, puts through `ctl put`,
// and `ctl wear` shows the policy, every node's erase counts (cumulative,
// last epoch, per die) and the state mix.
func TestWearThroughBinary(t *testing.T) {
	wd := t.TempDir()
	dev, _ := startDevBinary(t, wd, "--nodes", "6", "--wear-policy", "chameleon", "--wear-epoch", "200ms", "--wear-move-interval", "200ms")
	file := filepath.Join(wd, "obj")
	if err := os.WriteFile(file, bytes.Repeat([]byte("wear "), 40000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if out, errOut, code := runBinary(t, wd, "ctl", "put", k, file); code != 0 {
			t.Fatalf("ctl put %s: exit %d\n%s%s", k, code, out, errOut)
		}
	}
	// A node row: id, up, cumulative erases, last epoch, utilization, then
	// one count per die (a 64 MiB device has several).
	nodeRow := regexp.MustCompile(`(?m)^[1-6] +up +\d+ +\d+ +\d+\.\d% +\d+( \d+)+ *$`)
	var out string
	waitFor(t, "ctl wear to show a balanced epoch with per-die erase counts", func() bool {
		var errOut string
		var code int
		out, errOut, code = runBinary(t, wd, "ctl", "wear")
		if code != 0 {
			t.Fatalf("ctl wear: exit %d\n%s%s", code, out, errOut)
		}
		return strings.Contains(out, "policy chameleon (initial ec)") && !strings.Contains(out, "epoch 0 ") &&
			strings.Contains(out, "ERASES PER DIE") && len(nodeRow.FindAllString(out, -1)) == 6 &&
			regexp.MustCompile(`(?m)^EC +3 `).MatchString(out) && strings.Contains(out, "moves: ")
	})
	t.Logf("ctl wear:\n%s", out)
	dev.signal(t, syscall.SIGTERM)
	if code := dev.wait(t, "dev after SIGTERM"); code != 0 {
		t.Fatalf("dev after SIGTERM: exit %d\n%s", code, dev.errOut.String())
	}
}

// TestWearMoveDevKilledThroughBinary kills `flashmend dev` (coordinator,
// embedded etcd and nodes in one process) with SIGKILL in the middle of a
// part move, once at each of the move's steps (alternately a REP and an EC
// object), and starts it again on its directory: every object reads back
// byte-identical, from its old layout when the kill came before the
// commit and from its new one after, and that layout is whole.
func TestWearMoveDevKilledThroughBinary(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	wd := t.TempDir()
	const nodes = 7
	args := []string{"--nodes", fmt.Sprint(nodes)}
	dev, ep := startDevBinary(t, wd, args...)
	dial := func(ep string) *client.Client {
		t.Helper()
		c, err := client.Dial(ctx, ep, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		waitFor(t, "every node live", func() bool {
			infos, err := c.Nodes(ctx)
			live := 0
			for _, n := range infos {
				if n.Live {
					live++
				}
			}
			return err == nil && live == nodes
		})
		return c
	}
	c := dial(ep)
	type moved struct {
		key       string
		data      []byte
		old       []uint64
		mv        client.PartMove
		committed bool
	}
	var all []moved
	steps := []client.MoveStep{client.MoveBegun, client.MoveCopying, client.MoveCopied, client.MoveCommitted}
	for i, step := range steps {
		red, size := objectpb.Redundancy_REP, 5*64<<10-10
		if i%2 == 1 {
			red, size = objectpb.Redundancy_EC, 3*256<<10-10
		}
		k := fmt.Sprintf("kill-%v-%v", step, red)
		data := make([]byte, size)
		rng.Read(data)
		rec, err := c.Put(ctx, k, data, red)
		if err != nil {
			t.Fatal(err)
		}
		var outside []uint64
		for id := uint64(1); id <= nodes; id++ {
			if !slices.Contains(rec.Placement, id) {
				outside = append(outside, id)
			}
		}
		slot := uint32(rng.Intn(len(rec.Placement)))
		m := moved{key: k, data: data, old: slices.Clone(rec.Placement), committed: step == client.MoveCommitted,
			mv: client.PartMove{Key: k, Version: rec.Version, Slot: slot, From: rec.Placement[slot], To: outside[rng.Intn(len(outside))]}}
		calls := 0
		_, err = c.MovePart(ctx, m.mv, nil, func(s client.MoveStep) error {
			if s != step {
				return nil
			}
			if calls++; s == client.MoveCopying && calls < 2 {
				return nil // one chunk or row on the destination first
			}
			dev.cmd.Process.Kill()
			dev.wait(t, "dev after SIGKILL")
			return fmt.Errorf("dev killed at %v", s)
		})
		if err == nil || !strings.Contains(err.Error(), "dev killed") {
			t.Fatalf("%s: move: %v (want the kill)", k, err)
		}
		all = append(all, m)
		c.Close()
		dev, ep = startDevBinary(t, wd, args...)
		c = dial(ep)
		for _, m := range all {
			rec, err := c.Stat(ctx, m.key)
			if err != nil {
				t.Fatalf("%s: stat after the restart: %v", m.key, err)
			}
			want := slices.Clone(m.old)
			if m.committed {
				want[m.mv.Slot] = m.mv.To
			}
			if !slices.Equal(rec.Placement, want) {
				t.Fatalf("%s (killed at %v): placement %v, want %v (old %v)", m.key, step, rec.Placement, want, m.old)
			}
			got, err := c.Get(ctx, m.key)
			if err != nil || !bytes.Equal(got, m.data) {
				t.Fatalf("%s: read %d bytes, %v (want %d bytes)", m.key, len(got), err, len(m.data))
			}
			rep, err := c.ScrubObject(ctx, rec, nil, nil)
			if err != nil || rep.Repaired != 0 || rep.RepairFailed != 0 {
				t.Fatalf("%s: layout %v not whole after the restart: %v, %v", m.key, rec.Placement, rep, err)
			}
		}
	}
	dev.signal(t, syscall.SIGTERM)
	if code := dev.wait(t, "dev after SIGTERM"); code != 0 {
		t.Fatalf("dev after SIGTERM: exit %d\n%s", code, dev.errOut.String())
	}
}

// TestPrintWear checks `ctl wear`'s report against testdata/wear.golden
// (go test -run TestPrintWear ./internal/cli -update-wear rewrites it):
// node rows with per-die counts and one node that did not answer, the
// state mix, and recent moves of each outcome.
func TestPrintWear(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	st := &coordpb.WearStatusResponse{
		Policy: "chameleon", InitialRedundancy: "ec", Epoch: 42, EpochMillis: 60000,
		EraseMean: 1500, EraseSigma: 150, Hcds: true, Arpt: true,
		Nodes: []*coordpb.WearNode{
			{Id: 1, Live: true, Erases: 1650, EraseRate: 12, Utilization: 0.412},
			{Id: 2, Live: true, Erases: 1350, EraseRate: 3, Utilization: 0.25},
			{Id: 3, Live: false, Erases: 900, Utilization: 0.1},
		},
		States: []*coordpb.WearStateCount{
			{State: "REP", Objects: 3, Bytes: 3 << 20}, {State: "EC", Objects: 40, Bytes: 40 << 20},
			{State: "late-REP", Objects: 1, Bytes: 1 << 20}, {State: "late-EC"}, {State: "REP-EWO"}, {State: "EC-EWO", Objects: 2, Bytes: 2 << 20},
		},
		MovesPending: 1, MovesDone: 5, MovesFailed: 2, MovesSuperseded: 1, BytesMoved: 5 << 20, MappingRows: 3,
		MovesFailedByReason: []*coordpb.WearMoveCount{{Reason: "copy failed", Moves: 1}, {Reason: "not one part of one redundancy", Moves: 1}},
		RecentMoves: []*coordpb.WearMoveOutcome{
			{Id: 7, Key: "k/a", Slot: 2, From: 1, To: 2, Bytes: 1 << 20, Reason: "migrate", Outcome: "done", UnixMs: now.Add(-90 * time.Second).UnixMilli()},
			{Id: 8, Key: "k/b", Slot: 0, From: 1, To: 3, Bytes: 1 << 20, Reason: "migrate", Outcome: "failed", Why: "copy failed", Error: "copy to node 3: unavailable", UnixMs: now.Add(-30 * time.Second).UnixMilli()},
			{Id: 9, Key: "k/c", Slot: 4, From: 2, To: 1, Bytes: 256 << 10, Reason: "edm", Outcome: "superseded", Why: "a newer version was written", UnixMs: now.Add(-2 * time.Second).UnixMilli()},
			{Id: 10, Key: "k/d", Bytes: 1 << 20, Reason: "convert", Outcome: "failed", Why: "not one part of one redundancy", UnixMs: now.UnixMilli()},
		},
	}
	dies := map[uint64][]int64{1: {400, 420, 410, 420}, 2: {330, 340, 340, 340}}
	var out bytes.Buffer
	if err := printWear(&out, st, dies, now); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "wear.golden")
	if *updateWear {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-wear to create it)", err)
	}
	if out.String() != string(want) {
		t.Fatalf("ctl wear printed:\n%s\nwant (%s):\n%s", out.String(), golden, want)
	}
	out.Reset()
	if err := printWear(&out, &coordpb.WearStatusResponse{}, nil, now); err != nil || !strings.Contains(out.String(), "wear balancer: off") {
		t.Fatalf("balancer off: %q, %v", out.String(), err)
	}
}

var updateWear = flag.Bool("update-wear", false, "rewrite internal/cli/testdata/wear.golden")
