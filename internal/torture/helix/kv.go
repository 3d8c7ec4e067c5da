package helix

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/engine"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/kv/kvcluster"
)

// kvShard is the one shard of the helix KV cluster.
const kvShard base.ShardID = 1

func helixKey(i int) []byte { return []byte(fmt.Sprintf("helix-%07d", i)) }

// helixValue is key i's value: 64-191 printable bytes drawn from rng.
func helixValue(rng *rand.Rand, i int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	v := []byte(fmt.Sprintf("v%07d-", i))
	for n := 64 + rng.Intn(128); len(v) < n; {
		v = append(v, alphabet[rng.Intn(len(alphabet))])
	}
	return v
}

// replicaBlocks is one replica's data blocks that hold written keys: block
// b holds keys[b] (indexes into the key space, ascending).
type replicaBlocks struct {
	keys [][]int
	// meta are the blocks that also hold a copy of the replica's own
	// applied record: the first and the last (its two copies sort before
	// and after the user keys, internal/kv/engine/keys.go). No peer holds
	// that record, so its one good copy must stay on the replica itself.
	meta []int
}

// blocksOf groups keys 0..n-1 by the data block of a replica holding each:
// key k is in the first block whose separator is >= k, or past the last
// user-key separator (a block whose separator is the engine's own).
func blocksOf(seps [][]byte, n int) replicaBlocks {
	sort.Slice(seps, func(a, b int) bool { return bytes.Compare(seps[a], seps[b]) < 0 })
	byBlock := map[int][]int{}
	for i := 0; i < n; i++ {
		k := helixKey(i)
		b := sort.Search(len(seps), func(j int) bool { return bytes.Compare(seps[j], k) >= 0 })
		byBlock[b] = append(byBlock[b], i)
	}
	ids := make([]int, 0, len(byBlock))
	for b := range byBlock {
		ids = append(ids, b)
	}
	sort.Ints(ids)
	var out replicaBlocks
	for _, b := range ids {
		out.keys = append(out.keys, byBlock[b])
	}
	if len(out.keys) > 0 {
		out.meta = []int{0, len(out.keys) - 1}
	}
	return out
}

// planKVDamage picks, in a seeded order over every (replica, block), the
// blocks to damage: at most fraction of each replica's blocks, never a
// block whose damage would leave one of its keys intact on no replica, and
// never the last intact block holding a copy of a replica's own applied
// record (replicaBlocks.meta). It
// returns the chosen blocks per replica and how many copies of each key
// stay intact.
func planKVDamage(rng *rand.Rand, replicas []replicaBlocks, keys int, fraction float64) (chosen [][]int, intact []int) {
	intact = make([]int, keys)
	for i := range intact {
		intact[i] = len(replicas)
	}
	type cand struct{ r, b int }
	var cands []cand
	limit := make([]int, len(replicas))
	for r, rb := range replicas {
		limit[r] = int(fraction * float64(len(rb.keys)))
		for b := range rb.keys {
			cands = append(cands, cand{r, b})
		}
	}
	rng.Shuffle(len(cands), func(a, b int) { cands[a], cands[b] = cands[b], cands[a] })
	chosen = make([][]int, len(replicas))
	for _, c := range cands {
		if len(chosen[c.r]) >= limit[c.r] {
			continue
		}
		ok := metaLeft(replicas[c.r].meta, chosen[c.r], c.b)
		for _, k := range replicas[c.r].keys[c.b] {
			ok = ok && intact[k] > 1
		}
		if !ok {
			continue
		}
		for _, k := range replicas[c.r].keys[c.b] {
			intact[k]--
		}
		chosen[c.r] = append(chosen[c.r], c.b)
	}
	for r := range chosen {
		sort.Ints(chosen[r])
	}
	return chosen, intact
}

// metaLeft reports whether damaging block b, with the blocks in damaged
// already damaged, leaves some block of meta intact (or b is not in meta).
func metaLeft(meta, damaged []int, b int) bool {
	if !slices.Contains(meta, b) {
		return true
	}
	for _, m := range meta {
		if m != b && !slices.Contains(damaged, m) {
			return true
		}
	}
	return false
}

// runKV loads keys into a three-replica shard, damages blocks on every
// replica (planKVDamage), restarts all replicas, reads every key back and
// waits for the replicas to converge.
func runKV(ctx context.Context, opts Options, rng *rand.Rand) (KVResult, error) {
	start := time.Now()
	res := KVResult{Keys: opts.Keys}
	// No block cache: a clean cached copy would hide the damage.
	c, err := kvcluster.Start(kvcluster.Config{Options: kv.Options{CacheBytes: -1}})
	if err != nil {
		return res, err
	}
	defer c.Close()
	cl, err := c.NewClient(kvclient.Options{Seed: rng.Int63()})
	if err != nil {
		return res, err
	}
	defer cl.Close()
	values := make([][]byte, opts.Keys)
	for i := range values {
		values[i] = helixValue(rng, i)
	}
	loaded, err := loadKV(ctx, cl, values, opts.ReadTimeout)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, opts.ReadTimeout)
	defer cancel()
	if err := c.WaitApplied(wctx, kvShard, loaded); err != nil {
		return res, fmt.Errorf("replicas did not apply the load: %w", err)
	}
	ids := c.NodeIDs()
	replicas := make([]replicaBlocks, len(ids))
	for r, id := range ids {
		seps, err := c.Node(id).Replica(kvShard).Separators()
		if err != nil {
			return res, fmt.Errorf("separators of n%d: %w", id, err)
		}
		replicas[r] = blocksOf(seps, opts.Keys)
		res.Blocks = append(res.Blocks, len(replicas[r].keys))
	}
	chosen, intact := planKVDamage(rng, replicas, opts.Keys, opts.Fraction)
	for _, n := range intact {
		if n == 1 {
			res.KeysOnOneReplica++
		}
	}
	// The damage lands at rest, every replica stopped: a running replica
	// that ran into damage already done (its own compaction, or a patch
	// request another replica's detection put in the log) would repair it
	// while the rest is injected.
	type files struct {
		fs  vfs.FS
		dir string
	}
	at := make([]files, len(ids))
	for r, id := range ids {
		fs, dir := c.Node(id).Replica(kvShard).Files()
		at[r] = files{fs, fs.PathJoin(dir, "pebble")}
	}
	for _, id := range ids {
		if err := c.StopNode(id); err != nil {
			return res, fmt.Errorf("stop n%d: %w", id, err)
		}
	}
	for r, id := range ids {
		var keys [][]byte
		var fracs []float64
		for _, b := range chosen[r] {
			bk := replicas[r].keys[b]
			keys = append(keys, helixKey(bk[len(bk)/2]))
			fracs = append(fracs, 0.05+0.9*rng.Float64())
		}
		damage, err := engine.CorruptBlocksAtRest(at[r].fs, at[r].dir, keys, fracs)
		if err != nil {
			return res, fmt.Errorf("damage n%d's blocks: %w", id, err)
		}
		// What landed, not what was planned: distinct blocks damaged.
		distinct := map[engine.BlockDamage]bool{}
		for _, d := range damage {
			distinct[d] = true
		}
		if len(distinct) != len(chosen[r]) {
			return res, fmt.Errorf("n%d: %d blocks planned, %d damaged: the tables changed after their blocks were listed", id, len(chosen[r]), len(distinct))
		}
		res.BlocksDamaged = append(res.BlocksDamaged, len(distinct))
		opts.Logf("helix: kv: n%d: %d of %d blocks damaged", id, len(distinct), len(replicas[r].keys))
	}
	opts.Logf("helix: kv: %d of %d keys intact on one replica only", res.KeysOnOneReplica, opts.Keys)
	for _, id := range ids {
		if err := c.RestartNode(id); err != nil {
			return res, fmt.Errorf("restart n%d: %w", id, err)
		}
	}
	for i, want := range values {
		readKey(ctx, cl, i, want, opts.ReadTimeout, &res)
	}
	res.Converged, res.Checksums = converge(ctx, c, opts.ReadTimeout)
	before := map[base.NodeID]kv.ReplicaStats{}
	for _, id := range ids {
		rep := c.Node(id).Replica(kvShard)
		st := rep.Stats()
		before[id] = st
		res.Patches += st.PatchesApplied
		res.BlocksMerged += st.BlocksMerged
		res.Rebuilds += st.Rebuilds
		for reason, n := range st.RebuildReasons {
			if res.RebuildReasons == nil {
				res.RebuildReasons = map[string]uint64{}
			}
			res.RebuildReasons[reason] += n
		}
		opts.Logf("helix: kv: %s: %v", rep, st)
	}
	// A scrub of every table: damage no read ran into would be found and
	// repaired now. The backing files of patched tables keep the damaged
	// blocks the patches cut out (until compactions drop them): the scrub
	// finds those too, and the replica knows them as already repaired.
	for _, id := range ids {
		rep := c.Node(id).Replica(kvShard)
		handled := rep.Stats().ReportsHandled
		_, damaged, err := rep.Scrub()
		if err != nil {
			addError(&res.Errors, "scrub n%d: %v", id, err)
		}
		res.ScrubDamaged += damaged
		// Its reports are handled on the replica's detect loop: wait for
		// them before judging what they started.
		if !waitUntil(ctx, opts.ReadTimeout, func() bool { return rep.Stats().ReportsHandled >= handled+uint64(damaged) }) {
			res.Converged = false
			addError(&res.Errors, "n%d: the scrub's %d reports were not handled in %v", id, damaged, opts.ReadTimeout)
		}
	}
	converged, sums := converge(ctx, c, opts.ReadTimeout)
	res.Converged = res.Converged && converged
	if !converged {
		res.Checksums = sums
	}
	for _, id := range ids {
		rep := c.Node(id).Replica(kvShard)
		st, was := rep.Stats(), before[id]
		left := (st.PatchesApplied - was.PatchesApplied) + (st.BlocksMerged - was.BlocksMerged) + (st.Rebuilds - was.Rebuilds)
		res.LeftToRepair += int(left)
		res.Rebuilds += st.Rebuilds - was.Rebuilds
		if left > 0 {
			opts.Logf("helix: kv: %s: the scrub after convergence found %d repairs to do: %v", rep, left, st)
		}
	}
	// Keys read once more after convergence: the repairs must have kept
	// them.
	for i, want := range values {
		readKey(ctx, cl, i, want, opts.ReadTimeout, &res)
	}
	res.Took = time.Since(start)
	opts.Logf("helix: kv: patches %d, blocks merged %d, rebuilds %d, converged %t, lost %d, wrong %d",
		res.Patches, res.BlocksMerged, res.Rebuilds, res.Converged, res.Lost, res.Wrong)
	return res, nil
}

// loadKV writes the values in batches of 100 and returns the last index. A
// batch whose outcome is unknown (a proposal not applied in time on a
// loaded machine) is sent again: writing the same values twice is
// harmless.
func loadKV(ctx context.Context, cl *kvclient.Client, values [][]byte, timeout time.Duration) (uint64, error) {
	var last uint64
	for i := 0; i < len(values); i += 100 {
		var ops []kvclient.Op
		for j := i; j < i+100 && j < len(values); j++ {
			ops = append(ops, kvclient.Op{Key: helixKey(j), Value: values[j]})
		}
		bctx, cancel := context.WithTimeout(ctx, timeout)
		for {
			idx, err := cl.Batch(bctx, ops, nil)
			if err == nil {
				last = max(last, idx)
				break
			}
			if base.IsInvalidArgument(err) || bctx.Err() != nil {
				cancel()
				return 0, fmt.Errorf("batch at key %d: %w", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
	}
	return last, nil
}

// readKey reads key i until it returns want or the deadline passes: a
// replica repairing the key's range refuses the read and the client tries
// another, so errors and "not found" are tried again; a different value is
// wrong at once.
func readKey(ctx context.Context, cl *kvclient.Client, i int, want []byte, timeout time.Duration, res *KVResult) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		v, found, err := cl.Get(ctx, helixKey(i), kvclient.Eventual())
		switch {
		case err == nil && found && bytes.Equal(v, want):
			return
		case err == nil && found:
			res.Wrong++
			addError(&res.Errors, "%s: read %q, wrote %q", helixKey(i), v, want)
			return
		case ctx.Err() != nil:
			res.Lost++
			addError(&res.Errors, "%s: found %t, %v", helixKey(i), found, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitUntil polls cond until it holds or timeout passes; it reports
// whether cond held.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// converge waits until every replica has no repair pending and all report
// the same content checksum at the same applied index.
func converge(ctx context.Context, c *kvcluster.Cluster, timeout time.Duration) (bool, []string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var sums []string
		same, pending, first := true, 0, ""
		for k, id := range c.NodeIDs() {
			rep := c.Node(id).Replica(kvShard)
			pending += rep.RepairsPending()
			crc, rows, applied, err := rep.ContentChecksum()
			state := fmt.Sprintf("crc=%08x rows=%d applied=%d", crc, rows, applied)
			if err != nil {
				state, same = err.Error(), false
			}
			if k == 0 {
				first = state
			}
			same = same && state == first
			sums = append(sums, fmt.Sprintf("n%d %s", id, state))
		}
		if same && pending == 0 {
			return true, sums
		}
		select {
		case <-ctx.Done():
			return false, sums
		case <-time.After(20 * time.Millisecond):
		}
	}
}
