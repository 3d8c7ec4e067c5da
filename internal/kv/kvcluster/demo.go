package kvcluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
)

// RepairDemoConfig configures RunRepairDemo.
type RepairDemoConfig struct {
	// Keys to load (default 5000), each with a 128-byte value.
	Keys int
	// Mode is the repair mode under test.
	Mode kv.RepairMode
}

// RepairDemoReport is what RunRepairDemo measured.
type RepairDemoReport struct {
	Mode        kv.RepairMode
	Keys        int
	Victim      string
	File        string
	BlockOffset uint64
	// Repair is detection to repaired state applied (patch ingested, or
	// rebuild installed).
	Repair time.Duration
	// Transferred is the bytes shipped to the victim (patch or whole state).
	Transferred uint64
	// ShardBytes is the size of the shard's whole state, for comparison.
	ShardBytes uint64
	Patches    uint64
	Rebuilds   uint64
	// Reads issued through the client while the damage was live, and how
	// many returned an error or wrong data to the application.
	Reads, ReadErrors, WrongReads int
	Retries                       int
	Checksums                     map[base.NodeID]string
	Consistent                    bool
}

func (r RepairDemoReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode                 %s\n", r.Mode)
	fmt.Fprintf(&b, "keys                 %d in one shard, 3 replicas\n", r.Keys)
	fmt.Fprintf(&b, "damaged              data block at offset %d of %s on %s\n", r.BlockOffset, r.File, r.Victim)
	fmt.Fprintf(&b, "repair               %v from detection (patches %d, rebuilds %d)\n", r.Repair, r.Patches, r.Rebuilds)
	fmt.Fprintf(&b, "bytes to the victim  %d (whole shard %d)\n", r.Transferred, r.ShardBytes)
	fmt.Fprintf(&b, "client reads         %d, errors seen by the application %d, wrong data %d, replica retries %d\n",
		r.Reads, r.ReadErrors, r.WrongReads, r.Retries)
	fmt.Fprintf(&b, "replicas identical   %t %v\n", r.Consistent, r.Checksums)
	return b.String()
}

func demoKey(i int) []byte   { return []byte(fmt.Sprintf("key-%07d", i)) }
func demoValue(i int) []byte { return []byte(fmt.Sprintf("%0128d", i)) }

// RunRepairDemo starts a 3-node loopback cluster in memory, loads keys,
// damages the sstable data block holding the middle key on a follower,
// reads through the client while the damage is live, and reports how the
// store repaired it.
func RunRepairDemo(ctx context.Context, cfg RepairDemoConfig) (RepairDemoReport, error) {
	if cfg.Keys == 0 {
		cfg.Keys = 5000
	}
	if cfg.Keys < 100 {
		return RepairDemoReport{}, base.InvalidArgumentf("kv: demo needs at least 100 keys")
	}
	rep := RepairDemoReport{Mode: cfg.Mode, Keys: cfg.Keys}
	c, err := Start(Config{Options: kv.Options{Mode: cfg.Mode, CacheBytes: -1}})
	if err != nil {
		return rep, err
	}
	defer c.Close()
	cl, err := c.NewClient(kvclient.Options{Seed: 1})
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		return rep, err
	}
	var loaded uint64
	for i := 0; i < cfg.Keys; i += 100 {
		var ops []kvclient.Op
		for j := i; j < i+100 && j < cfg.Keys; j++ {
			ops = append(ops, kvclient.Op{Key: demoKey(j), Value: demoValue(j)})
		}
		// A batch of puts is idempotent: one whose outcome is unknown (on a
		// loaded machine: "proposal not applied within 5s") is sent again
		// until the demo's deadline.
		var idx uint64
		for {
			if idx, err = cl.Batch(ctx, ops, nil); err == nil || base.IsInvalidArgument(err) || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return rep, err
		}
		loaded = max(loaded, idx)
	}
	victimNode := leader%3 + 1
	victim := c.Node(victimNode).Replica(1)
	lr := c.Node(leader).Replica(1)
	// Every replica applies the whole load before the damage: the reads
	// below are eventual, and a replica still behind would answer "not
	// found" for keys it has not applied yet, which is staleness, not the
	// damage (a write's quorum is two of the three replicas).
	if err := c.WaitApplied(ctx, 1, loaded); err != nil {
		return rep, fmt.Errorf("kv: demo: replicas did not apply the load: %w", err)
	}
	rep.Victim = victim.String()
	if err := victim.Compact(ctx); err != nil {
		return rep, err
	}
	target := cfg.Keys / 2
	if rep.File, rep.BlockOffset, err = victim.CorruptBlock(demoKey(target)); err != nil {
		return rep, err
	}
	// Traffic on the victim runs into the damage.
	_, _, _, _ = victim.Get(ctx, demoKey(target), &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
	for {
		for k := target - 20; k <= target+20; k++ {
			v, found, err := cl.Get(ctx, demoKey(k), kvclient.Eventual())
			rep.Reads++
			switch {
			case err != nil:
				rep.ReadErrors++
			case !found || !bytes.Equal(v, demoValue(k)):
				rep.WrongReads++
			}
		}
		st := victim.Stats()
		if st.PatchesApplied+st.Rebuilds > 0 {
			break
		}
		if ctx.Err() != nil {
			return rep, fmt.Errorf("kv: demo: no repair: %w", ctx.Err())
		}
	}
	st := victim.Stats()
	rep.Repair, rep.Patches, rep.Rebuilds = st.LastRepair, st.PatchesApplied, st.Rebuilds
	rep.Transferred = st.PatchBytesReceived + st.RebuildBytes
	rep.Retries = cl.Retries()
	if full, err := lr.StateForPeer(); err == nil {
		rep.ShardBytes = uint64(proto.Size(full))
	}
	// Wait until every replica applied the same index, then compare.
	rep.Checksums = map[base.NodeID]string{}
	for {
		idx := map[uint64]bool{}
		for _, id := range c.NodeIDs() {
			crc, rows, applied, err := c.Node(id).Replica(1).ContentChecksum()
			if err != nil {
				return rep, err
			}
			rep.Checksums[id] = fmt.Sprintf("%08x/%d", crc, rows)
			idx[applied] = true
		}
		if len(idx) == 1 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rep.Consistent = true
	for _, v := range rep.Checksums {
		rep.Consistent = rep.Consistent && v == rep.Checksums[c.NodeIDs()[0]]
	}
	return rep, nil
}
