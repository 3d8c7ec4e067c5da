package direct

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/klauspost/reedsolomon"

	"github.com/flashmend/flashmend/internal/base"
)

// replicaState is one replica's condition in the exhaustive tests.
type replicaState int

const (
	stGood        replicaState = iota
	stFlipA                    // bit 100 flipped
	stFlipB                    // bit 9000 flipped (another sector)
	stFlipA2                   // bits 100 and 40000 flipped
	stUnavailable              // node down
	stSumsBad                  // data fine, sums record corrupt
	stShort                    // truncated data
	stFlipC                    // bit 101 flipped (flipA's sector, another bit)
	stFlipD                    // bit 4000 flipped (flipA's sector, another byte)
	stSumsEntry                // data fine, sums record corrupt at sector 1's entry (its other entries usable)
	numStates
)

func (s replicaState) String() string {
	return [...]string{"good", "flipA", "flipB", "flipA2", "down", "sumsbad", "short", "flipC", "flipD", "sumsentry"}[s]
}

func (s replicaState) flips() []int {
	switch s {
	case stFlipA:
		return []int{100}
	case stFlipB:
		return []int{9000}
	case stFlipA2:
		return []int{100, 40000}
	case stFlipC:
		return []int{101}
	case stFlipD:
		return []int{4000}
	}
	return nil
}

func makeRead(s replicaState, id ChunkID, data []byte) ReplicaRead {
	sums := Sums(id, data)
	d := append([]byte(nil), data...)
	for _, bit := range s.flips() {
		d[bit/8] ^= 1 << (bit % 8)
	}
	switch s {
	case stUnavailable:
		return ReplicaRead{Fetched: true, Err: fmt.Errorf("node down")}
	case stSumsBad:
		return ReplicaRead{Fetched: true, Data: d}
	case stSumsEntry:
		damaged := append([]uint32(nil), sums...)
		damaged[1] ^= 1 << 7
		return ReplicaRead{Fetched: true, Data: d, DamagedSums: damaged}
	case stShort:
		d = d[:len(d)-1]
	}
	return ReplicaRead{Fetched: true, Data: d, Sums: sums}
}

// expectREP is the reference model: an independent statement of the
// DIRECT protocol outcome for one chunk, from the flipped bit positions.
func expectREP(states []replicaState) (ok bool, repairs []int, voted bool) {
	for i, s := range states {
		if s == stGood {
			for j := 0; j < i; j++ {
				if states[j] != stUnavailable {
					repairs = append(repairs, j)
				}
			}
			return true, repairs, false
		}
	}
	// No copy verifies whole. Sector by sector: a sector is served by a copy
	// that is clean there, or else voted over three full-length copies.
	var copies []replicaState
	haveSums := false
	for i, s := range states {
		if s == stUnavailable {
			continue
		}
		repairs = append(repairs, i)
		if s != stSumsBad && s != stSumsEntry { // REP uses only intact records
			haveSums = true
		}
		if s != stShort {
			copies = append(copies, s)
		}
	}
	if !haveSums || len(copies) == 0 {
		return false, nil, false
	}
	sector := func(bit int) int { return bit / 8 / SectorSize }
	touched := map[int]bool{}
	for _, c := range copies {
		for _, b := range c.flips() {
			touched[sector(b)] = true
		}
	}
	for sec := range touched {
		clean := false
		for _, c := range copies {
			dirty := false
			for _, b := range c.flips() {
				dirty = dirty || sector(b) == sec
			}
			clean = clean || !dirty
		}
		if clean {
			continue
		}
		if len(copies) < 3 {
			return false, nil, false
		}
		count := map[int]int{}
		for _, c := range copies[:3] {
			for _, b := range c.flips() {
				if sector(b) == sec {
					count[b]++
				}
			}
		}
		for _, n := range count {
			if n >= 2 {
				return false, nil, false
			}
		}
		voted = true
	}
	return true, repairs, voted
}

func TestDecideREPExhaustive(t *testing.T) {
	id := ChunkID{Object: 5, Version: 6, Index: 7}
	data := make([]byte, ChunkSize)
	rand.New(rand.NewSource(1)).Read(data)
	cases := 0
	for a := replicaState(0); a < numStates; a++ {
		for b := replicaState(0); b < numStates; b++ {
			for c := replicaState(0); c < numStates; c++ {
				states := []replicaState{a, b, c}
				reads := make([]ReplicaRead, 3)
				var d Decision
				fetches := 0
				for {
					d = DecideREP(id, len(data), reads)
					if len(d.Fetch) == 0 {
						break
					}
					for _, i := range d.Fetch {
						if reads[i].Fetched {
							t.Fatalf("%v: fetched replica %d twice", states, i)
						}
						reads[i] = makeRead(states[i], id, data)
						fetches++
					}
				}
				ok, repairs, voted := expectREP(states)
				if ok != (d.Err == nil) {
					t.Fatalf("%v: got %s (%v); want ok=%v", states, d, d.Err, ok)
				}
				if !ok {
					down := slices.Contains(states, stUnavailable)
					if down != errors.Is(d.Err, ErrUnavailable) || down == base.IsDataLoss(d.Err) {
						t.Fatalf("%v: error class: %v", states, d.Err)
					}
					if d.Data != nil {
						t.Fatalf("%v: error with data", states)
					}
					continue
				}
				if !bytes.Equal(d.Data, data) {
					t.Fatalf("%v: WRONG DATA returned", states)
				}
				if !slices.Equal(d.Repairs, repairs) || d.Voted != voted {
					t.Fatalf("%v: got %s; want repairs %v voted %v", states, d, repairs, voted)
				}
				for i := range d.RepairData {
					if !bytes.Equal(d.RepairData[i], data) {
						t.Fatalf("%v: repair %d with wrong bytes", states, i)
					}
				}
				cases++
			}
		}
	}
	t.Logf("%d successful cases", cases)
}

// encodedRow is an EC row of rowLen-byte shards: random data shards and
// their parity.
func encodedRow(t *testing.T, enc reedsolomon.Encoder, rng *rand.Rand, rowLen int) [][]byte {
	t.Helper()
	shards := make([][]byte, TotalShards)
	for s := range shards {
		shards[s] = make([]byte, rowLen)
		if s < DataShards {
			rng.Read(shards[s])
		}
	}
	if err := enc.Encode(shards); err != nil {
		t.Fatal(err)
	}
	return shards
}

func TestDecideECExhaustive(t *testing.T) {
	enc := NewEncoder()
	rng := rand.New(rand.NewSource(2))
	for _, rowLen := range []int{4096, 1200} {
		shards := encodedRow(t, enc, rng, rowLen)
		var ids [TotalShards]ChunkID
		for s := range ids {
			ids[s] = ChunkID{Object: 1, Version: 1, Shard: uint32(s), Index: 3}
		}
		want := bytes.Join(shards[:DataShards], nil)
		ecStates := []replicaState{stGood, stFlipA, stFlipB, stUnavailable, stSumsBad, stSumsEntry}
		total := 1
		for range TotalShards {
			total *= len(ecStates)
		}
		for code := 0; code < total; code++ {
			var states [TotalShards]replicaState
			c := code
			for s := range states {
				states[s] = ecStates[c%len(ecStates)]
				c /= len(ecStates)
			}
			// Reference: every sector needs four shards that verify there
			// (flipA damages sector 0, flipB sector 2, sumsentry's record
			// sector 1's entry).
			good := DataShards
			for sector := 0; sector < 3; sector++ {
				n := 0
				for _, st := range states {
					switch st {
					case stGood:
						n++
					case stFlipA:
						if sector != 0 {
							n++
						}
					case stFlipB:
						if sector != 2 {
							n++
						}
					case stSumsEntry:
						if sector != 1 {
							n++
						}
					}
				}
				good = min(good, n)
			}
			var reads [TotalShards]ReplicaRead
			var d Decision
			for {
				d = DecideEC(enc, ids, rowLen, reads)
				if len(d.Fetch) == 0 {
					break
				}
				for _, s := range d.Fetch {
					if reads[s].Fetched {
						t.Fatalf("%v: shard %d fetched twice", states, s)
					}
					reads[s] = makeRead(states[s], ids[s], shards[s])
				}
			}
			if (good >= DataShards) != (d.Err == nil) {
				t.Fatalf("%v: got %s %v", states, d, d.Err)
			}
			if d.Err != nil {
				// Data loss only when every shard answered.
				down := false
				for s := range reads {
					down = down || (reads[s].Fetched && states[s] == stUnavailable)
				}
				if down != errors.Is(d.Err, ErrUnavailable) || down == base.IsDataLoss(d.Err) {
					t.Fatalf("%v: error class: %v", states, d.Err)
				}
				continue
			}
			if !bytes.Equal(d.Data, want) {
				t.Fatalf("%v: WRONG DATA", states)
			}
			for i, s := range d.Repairs {
				if !reads[s].Fetched || (states[s] != stFlipA && states[s] != stFlipB && states[s] != stSumsBad && states[s] != stSumsEntry) {
					t.Fatalf("%v: repair of shard %d in state %v", states, s, states[s])
				}
				if !bytes.Equal(d.RepairData[i], shards[s]) {
					t.Fatalf("%v: shard %d repaired with wrong bytes", states, s)
				}
			}
			for s := range reads {
				corruptRead := reads[s].Fetched && (states[s] == stFlipA || states[s] == stFlipB || states[s] == stSumsBad || states[s] == stSumsEntry)
				if corruptRead != slices.Contains(d.Repairs, s) {
					t.Fatalf("%v: shard %d read corrupt=%v but repairs %v", states, s, corruptRead, d.Repairs)
				}
			}
		}
	}
}

func TestMajorityVote(t *testing.T) {
	a := []byte{0b1010_1010, 0xff, 0x00}
	b := []byte{0b1010_1011, 0xfe, 0x00}
	c := []byte{0b0010_1010, 0xff, 0x01}
	if got := MajorityVote([][]byte{a, b, c}); !bytes.Equal(got, []byte{0b1010_1010, 0xff, 0x00}) {
		t.Fatalf("vote of three: %08b", got)
	}
	e := []byte{0b1010_1011, 0xfe, 0x01}
	if got := MajorityVote([][]byte{a, b, c, e, a}); !bytes.Equal(got, []byte{0b1010_1010, 0xff, 0x00}) {
		t.Fatalf("vote of five: %08b", got)
	}
}

func TestDecideHDFS(t *testing.T) {
	id := ChunkID{Object: 1, Version: 1}
	data := make([]byte, ChunkSize)
	rand.New(rand.NewSource(3)).Read(data)
	for _, tc := range []struct {
		chunks  [][]replicaState // per chunk, the three replicas
		ok      bool
		failed  []bool
		fetches int
	}{
		{[][]replicaState{{stGood, stGood, stGood}, {stGood, stGood, stGood}}, true, []bool{false, false, false}, 2},
		// A fails on chunk 0: switch to B and stay there even when A is fine.
		{[][]replicaState{{stFlipA, stGood, stGood}, {stGood, stGood, stGood}}, true, []bool{true, false, false}, 3},
		// Every replica fails at some chunk: the block read fails, even
		// though each chunk has a good copy somewhere (DIRECT would succeed).
		{[][]replicaState{{stFlipA, stGood, stGood}, {stGood, stFlipB, stGood}, {stGood, stGood, stFlipA}}, false, []bool{true, true, true}, 5},
		// Two transient flips on the same chunk: no re-read, no vote.
		{[][]replicaState{{stFlipA, stFlipB, stGood}}, true, []bool{true, true, false}, 3},
		{[][]replicaState{{stFlipA, stFlipB, stFlipA2}}, false, []bool{true, true, true}, 3},
	} {
		st := NewHDFSState(3)
		fetches := 0
		ok := true
		for _, chunk := range tc.chunks {
			reads := make([]ReplicaRead, 3)
			var d Decision
			for {
				d = DecideHDFS(st, id, len(data), reads)
				if len(d.Fetch) == 0 {
					break
				}
				reads[d.Fetch[0]] = makeRead(chunk[d.Fetch[0]], id, data)
				fetches++
			}
			if d.Err != nil {
				if !base.IsDataLoss(d.Err) {
					t.Fatalf("%v: %v", tc.chunks, d.Err)
				}
				ok = false
				break
			}
			if !bytes.Equal(d.Data, data) {
				t.Fatalf("%v: wrong data", tc.chunks)
			}
		}
		if ok != tc.ok || !slices.Equal(st.Failed, tc.failed) || fetches != tc.fetches {
			t.Fatalf("%v: ok=%v state %s fetches %d; want ok=%v failed %v fetches %d",
				tc.chunks, ok, st, fetches, tc.ok, tc.failed, tc.fetches)
		}
	}
}
