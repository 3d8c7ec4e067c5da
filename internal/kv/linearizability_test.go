package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/kv"
	"github.com/flashmend/flashmend/internal/kv/kvapi"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/testseed"
)

// registerInput is one operation on a key of the register model.
type registerInput struct {
	op    string // "get", "put", "cas"
	key   string
	value string // put/cas: new value
	old   string // cas: expected value ("" = absent)
}

type registerOutput struct {
	value   string // get: value read ("" = absent)
	ok      bool   // cas: swapped
	unknown bool   // put/cas failed ambiguously: may or may not have applied
}

// registerModel is a map of independent registers, partitioned by key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(registerInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return "" },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(string), input.(registerInput), output.(registerOutput)
		switch in.op {
		case "get":
			return out.value == s, s
		case "put":
			return true, in.value
		case "cas":
			if out.unknown {
				if s == in.old {
					return true, in.value
				}
				return true, s
			}
			if out.ok {
				return s == in.old, in.value
			}
			return s != in.old, s
		}
		return false, s
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(registerInput), output.(registerOutput)
		return fmt.Sprintf("%s(%s,%s,%s) -> %+v", in.op, in.key, in.old, in.value, out)
	},
}

// TestLinearizabilityUnderCorruptionAndRestarts records a history of strong
// reads, writes and compare-and-sets while the nemesis damages sstable data
// blocks on the leader and a follower and restarts nodes, and checks it with
// porcupine.
func TestLinearizabilityUnderCorruptionAndRestarts(t *testing.T) {
	// "corrupt" (damage only) and "restart" (restarts only) are the two
	// halves of "both"; run them by hand when "both" fails.
	checkLinearizability(t, "both")
}

func checkLinearizability(t *testing.T, nemesis string) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	c, cl := startCluster(t, kv.Options{PatchTimeout: time.Second})
	loadKeys(t, cl, 2000)                                      // filler so that data blocks exist around the registers
	keys := []string{"key-00500r", "key-01000r", "key-01500r"} // absent at first, among the filler

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		start   = time.Now()
	)
	now := func() int64 { return int64(time.Since(start)) }
	record := func(client int, in registerInput, out registerOutput, call, ret int64) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 4
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(id)))
			own, err := c.NewClient(kvclient.Options{Seed: seed + int64(id)})
			if err != nil {
				t.Error(err)
				return
			}
			defer own.Close()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rng.Intn(len(keys))]
				ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
				call := now()
				switch r := rng.Intn(10); {
				case r < 5:
					v, found, err := own.Get(ctx, []byte(key), kvclient.Strong())
					if err == nil {
						s := ""
						if found {
							s = string(v)
						}
						record(id, registerInput{op: "get", key: key}, registerOutput{value: s}, call, now())
					}
				case r < 8:
					val := fmt.Sprintf("c%d-%d", id, n)
					_, err := own.Put(ctx, []byte(key), []byte(val))
					ret := now()
					if err != nil {
						ret = math.MaxInt64
					}
					record(id, registerInput{op: "put", key: key, value: val}, registerOutput{unknown: err != nil}, call, ret)
				default:
					// Compare-and-set from the value this client last read.
					v, found, err := own.Get(ctx, []byte(key), kvclient.Strong())
					if err != nil {
						cancel()
						continue
					}
					old := ""
					if found {
						old = string(v)
					}
					call = now()
					val := fmt.Sprintf("c%d-%d-cas", id, n)
					var oldArg []byte
					if found {
						oldArg = v
					}
					ok, err := own.CompareAndSet(ctx, []byte(key), oldArg, []byte(val))
					ret := now()
					if err != nil {
						ret = math.MaxInt64
					}
					record(id, registerInput{op: "cas", key: key, value: val, old: old}, registerOutput{ok: ok, unknown: err != nil}, call, ret)
				}
				cancel()
			}
		}(i)
	}

	// The nemesis.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rng := rand.New(rand.NewSource(seed))
	pause := func() { time.Sleep(time.Duration(300+rng.Intn(300)) * time.Millisecond) }
	pause()
	pause()
	leader, err := c.WaitLeader(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if nemesis == "corrupt" || nemesis == "both" {
		// Damage the block under a register on the leader, then on a
		// follower; a background scan on the victim (other traffic) runs
		// into the damage, and the repair must carry the register's latest
		// value as of the patch entry.
		for _, victim := range []*kv.Replica{c.Node(leader).Replica(1), c.Node(leader%3 + 1).Replica(1)} {
			corruptReplica(t, victim, []byte(keys[rng.Intn(len(keys))]))
			_, _, _, err := victim.Scan(ctx, nil, nil, 0, 0, &kvpb.ReadOptions{Consistency: kvpb.Consistency_EVENTUAL})
			if st := victim.Stats(); err == nil && st.CorruptionsDetected+st.PatchesApplied+st.Rebuilds > 0 {
				// The workload's reads found the damage first and its
				// patch was installed before the scan ran (seen at seed
				// 1795593100283840098 once commits got faster), possibly
				// not yet counted as applied when the stats were read
				// (seen under load at seed 1200783366338606409): the
				// detection was counted before the patch was proposed.
				t.Logf("%s repaired before the scan: %v", victim, st)
			} else if !base.IsCorruption(err) && !errors.Is(err, kvapi.ErrReplicaUnavailable) {
				// (Unavailable: a CAS evaluated on the damaged block first
				// and the replica is already rebuilding.)
				t.Fatalf("scan over damaged block: %v", err)
			}
			waitFor(t, "patch", func() bool { return victim.Stats().PatchesApplied+victim.Stats().Rebuilds > 0 })
			t.Logf("%s repaired: %v", victim, victim.Stats())
			pause()
		}
	}
	for round := 0; round < 2 && (nemesis == "restart" || nemesis == "both"); round++ {
		victim := base.NodeID(1 + rng.Intn(3))
		if round == 1 {
			if victim, err = c.WaitLeader(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.StopNode(victim); err != nil {
			t.Fatal(err)
		}
		pause()
		if err := c.RestartNode(victim); err != nil {
			t.Fatal(err)
		}
		pause()
	}
	close(stop)
	wg.Wait()

	var repairs, rebuilds uint64
	for _, id := range c.NodeIDs() {
		st := c.Node(id).Replica(1).Stats()
		repairs += st.PatchesApplied
		rebuilds += st.Rebuilds
	}
	t.Logf("%d operations; patches applied %d, rebuilds %d (since the last restarts)", len(history), repairs, rebuilds)
	if len(history) < 50 {
		t.Fatalf("only %d operations recorded", len(history))
	}
	res := porcupine.CheckOperationsTimeout(registerModel, history, 60*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history is %s (seed %d)", res, seed)
	}
	assertSame(t, checksums(t, c, 1))
}
