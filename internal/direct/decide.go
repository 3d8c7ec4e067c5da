package direct

import (
	"errors"
	"fmt"
	"strings"

	"github.com/klauspost/reedsolomon"

	"github.com/flashmend/flashmend/internal/base"
)

// ReplicaRead is what one replica (or EC shard) returned for one chunk. The
// node serving it has already verified it and re-read it once on a mismatch
// (telling a transient flip from damage on the device); the decision cores
// verify again end to end.
type ReplicaRead struct {
	// Fetched is false while the replica has not been asked.
	Fetched bool
	// Err is an operating error: the node is down or the chunk is missing.
	Err error
	// Data is the chunk content as stored, corrupt or not: the node returns
	// corrupt content on request so that a majority vote is possible.
	Data []byte
	// Sums are the replica's checksums for the chunk, nil when its sums
	// record failed its own CRC.
	Sums []uint32
	// DamagedSums are the entries of the replica's sums record when it
	// failed its own CRC (Sums is nil): EC's per-sector decode checks each
	// sector against its own entry (objstore/sumsrec.Damaged).
	DamagedSums []uint32
	// Missing: the node answered but has no such chunk (its file is gone).
	// A missing chunk is damage like a corrupt one: with no Data it is
	// judged corrupt and repaired; the I/O loop re-creates it.
	Missing bool
}

func (r ReplicaRead) String() string {
	switch {
	case !r.Fetched:
		return "unread"
	case r.Err != nil:
		return "unavailable"
	case r.Missing:
		return "missing"
	case r.Sums == nil:
		return fmt.Sprintf("%dB/no-sums", len(r.Data))
	default:
		return fmt.Sprintf("%dB", len(r.Data))
	}
}

// Decision is the output of a decision core. Exactly one of these holds:
// len(Fetch) > 0 (read those replicas and decide again), Err != nil (the
// read fails; it wraps base.ErrDataLoss), or Data holds verified bytes.
type Decision struct {
	Fetch []int
	Data  []byte
	Err   error
	// Repairs lists the replicas (or shards) whose stored chunk is corrupt and
	// must be rewritten, out of place, with RepairData[i].
	Repairs    []int
	RepairData [][]byte
	// Voted is set when the data came from a bit-by-bit majority vote.
	Voted bool
	// Reconstructed is set when EC data came from parity.
	Reconstructed bool
}

func (d Decision) String() string {
	var b strings.Builder
	switch {
	case len(d.Fetch) > 0:
		fmt.Fprintf(&b, "fetch %v", d.Fetch)
	case d.Err != nil:
		b.WriteString("error: data loss")
	default:
		fmt.Fprintf(&b, "data %dB", len(d.Data))
		if d.Voted {
			b.WriteString(" voted")
		}
		if d.Reconstructed {
			b.WriteString(" reconstructed")
		}
		if len(d.Repairs) > 0 {
			fmt.Fprintf(&b, " repair %v", d.Repairs)
		}
	}
	return b.String()
}

// verdict of one fetched replica.
type verdict int

const (
	unread verdict = iota
	unavailable
	corrupt
	good
)

// judge verifies one read of wantLen bytes starting at sector first of the
// chunk (0 for a whole chunk) against the sums of those sectors.
func judge(id ChunkID, first, wantLen int, r ReplicaRead) verdict {
	switch {
	case !r.Fetched:
		return unread
	case r.Err != nil:
		return unavailable
	case len(r.Data) != wantLen || r.Sums == nil || len(r.Sums) != SectorCount(wantLen):
		return corrupt
	case VerifyFrom(id, first, r.Data, r.Sums) != nil:
		return corrupt
	default:
		return good
	}
}

// ErrUnavailable marks a read that found no good copy while some copies
// could not be read at all (nodes down, chunks missing): an operating error,
// not data loss, since the missing copies may come back.
var ErrUnavailable = errors.New("not enough replicas available")

func countCorrupt(v [TotalShards]verdict) int {
	n := 0
	for _, x := range v {
		if x == corrupt {
			n++
		}
	}
	return n
}

// DecideREP is the DIRECT read decision for one chunk of a replicated object
// (DIRECT 000 section 4.2.2, Figure 6). reads are the replicas in read order.
// The first replica that verifies wins, and every replica read before it
// that returned corrupt content is repaired with its data. When every
// replica is corrupt the chunk is rebuilt by a bit-by-bit majority vote over
// the (at least three) corrupt copies, verified against the stored
// checksums; when that fails too the result is an explicit data-loss error.
func DecideREP(id ChunkID, wantLen int, reads []ReplicaRead) Decision {
	return decideREP(id, 0, wantLen, reads)
}

// decideREP is DecideREP for the wantLen bytes from sector first of the
// chunk (DecideSpanREP).
func decideREP(id ChunkID, first, wantLen int, reads []ReplicaRead) Decision {
	var corrupted []int
	for i, r := range reads {
		switch judge(id, first, wantLen, r) {
		case unread:
			return Decision{Fetch: []int{i}}
		case corrupt:
			corrupted = append(corrupted, i)
		case good:
			return withRepairs(Decision{Data: r.Data}, corrupted, r.Data)
		}
	}
	return vote(id, first, wantLen, reads, corrupted)
}

func withRepairs(d Decision, replicas []int, data []byte) Decision {
	d.Repairs = replicas
	for range replicas {
		d.RepairData = append(d.RepairData, data)
	}
	return d
}

// vote rebuilds a chunk every replica returned corrupt. It works sector by
// sector (the checksum granularity, so the smallest unit DIRECT can repair):
// a sector that verifies in some copy is taken from it, and only a sector
// that is corrupt in every copy is rebuilt by a bit-by-bit majority vote
// over the (at least three) copies (DIRECT 000 section 4.2.2, Figure 6b).
// The result is verified against the stored checksums; otherwise the read
// fails with an explicit data-loss error, or with ErrUnavailable when some
// replica could not be read at all.
func vote(id ChunkID, first, wantLen int, reads []ReplicaRead, corrupted []int) Decision {
	var trusted []uint32
	var copies [][]byte
	for _, i := range corrupted {
		r := reads[i]
		if trusted == nil && len(r.Sums) == SectorCount(wantLen) {
			trusted = r.Sums
		}
		if len(r.Data) == wantLen {
			copies = append(copies, r.Data)
		}
	}
	unavail := len(reads) - len(corrupted)
	if trusted != nil && len(copies) > 0 {
		if merged, voted, ok := mergeSectors(id, first, trusted, copies); ok {
			// Every copy is rewritten: its data or its sums record was wrong.
			return withRepairs(Decision{Data: merged, Voted: voted}, corrupted, merged)
		}
	}
	if unavail > 0 {
		// Not data loss yet: the missing replicas may come back.
		return Decision{Err: fmt.Errorf("chunk %s: %d replicas corrupt, %d unavailable: %w",
			id, len(corrupted), unavail, ErrUnavailable)}
	}
	return Decision{Err: base.DataLossErrorf(
		"chunk %s: all %d replicas corrupt and no sector-wise merge or majority vote verifies",
		id, len(corrupted))}
}

// mergeSectors assembles a chunk from the sectors of copies that verify
// against sums, voting bit by bit on sectors that verify in no copy. It
// reports whether any sector was voted and whether the result verifies.
func mergeSectors(id ChunkID, first int, sums []uint32, copies [][]byte) (merged []byte, voted bool, ok bool) {
	n := len(copies[0])
	bad := make([]map[int]bool, len(copies))
	for c, data := range copies {
		bad[c] = map[int]bool{}
		for _, s := range BadSectorsFrom(id, first, data, sums) {
			bad[c][s] = true
		}
	}
	voters := copies
	if len(voters)%2 == 0 {
		voters = voters[:len(voters)-1] // a vote needs an odd number of voters
	}
	merged = make([]byte, n)
	for s := 0; s < SectorCount(n); s++ {
		lo, hi := s*SectorSize, min((s+1)*SectorSize, n)
		from := -1
		for c := range copies {
			if !bad[c][s] {
				from = c
				break
			}
		}
		if from >= 0 {
			copy(merged[lo:hi], copies[from][lo:hi])
			continue
		}
		if len(voters) < 3 {
			return nil, false, false
		}
		part := make([][]byte, len(voters))
		for c := range voters {
			part[c] = voters[c][lo:hi]
		}
		copy(merged[lo:hi], MajorityVote(part))
		voted = true
	}
	return merged, voted, VerifyFrom(id, first, merged, sums) == nil
}

// MajorityVote returns, bit by bit, the value most of copies hold. copies
// must be an odd number of equal-length byte slices.
func MajorityVote(copies [][]byte) []byte {
	out := make([]byte, len(copies[0]))
	if len(copies) == 3 {
		a, b, c := copies[0], copies[1], copies[2]
		for i := range out {
			out[i] = (a[i] & b[i]) | (a[i] & c[i]) | (b[i] & c[i])
		}
		return out
	}
	need := len(copies)/2 + 1
	for i := range out {
		var v byte
		for bit := 0; bit < 8; bit++ {
			n := 0
			for _, c := range copies {
				n += int(c[i]>>bit) & 1
			}
			if n >= need {
				v |= 1 << bit
			}
		}
		out[i] = v
	}
	return out
}

// EC geometry: Reed-Solomon 4 data + 2 parity shards.
const (
	DataShards   = 4
	ParityShards = 2
	TotalShards  = DataShards + ParityShards
)

// NewEncoder returns the Reed-Solomon 4+2 codec used by EC objects.
func NewEncoder() reedsolomon.Encoder {
	enc, err := reedsolomon.New(DataShards, ParityShards)
	if err != nil {
		panic(base.AssertionFailedf("reedsolomon.New(4, 2): %v", err))
	}
	return enc
}

// DecideEC is the DIRECT read decision for one 64 KiB row of an EC object:
// rowLen is the length of every shard's chunk in the row and ids[s] the
// identity of shard s's chunk. It first reads the data shards; for each one
// that is corrupt or unavailable it reads one more parity shard, and
// reconstructs only this row from the other shards' same rows. Corrupt shards
// that were read (data or parity) are repaired. With more than two corrupt
// or missing shards in the row the result is an explicit data-loss error.
// The Data of the decision is the row's data shards concatenated.
func DecideEC(enc reedsolomon.Encoder, ids [TotalShards]ChunkID, rowLen int, reads [TotalShards]ReplicaRead) Decision {
	return decideEC(enc, ids, 0, rowLen, reads, nil)
}

// DecideECInto is DecideEC assembling the row's data in dst's memory when
// it fits (cap(dst) >= DataShards*rowLen; else in a new buffer): a reader
// may hand it a pooled buffer.
func DecideECInto(enc reedsolomon.Encoder, ids [TotalShards]ChunkID, rowLen int, reads [TotalShards]ReplicaRead, dst []byte) Decision {
	return decideEC(enc, ids, 0, rowLen, reads, dst)
}

// decideEC is DecideEC for the rowLen bytes from sector first of every
// shard's chunk in the row (DecideSpanEC): Reed-Solomon works byte by byte
// across the shards, so the same byte range of k shards decodes that range
// of the others.
//
// The row's data is assembled in dst when it fits (nil: a new buffer).
func decideEC(enc reedsolomon.Encoder, ids [TotalShards]ChunkID, first, rowLen int, reads [TotalShards]ReplicaRead, dst []byte) Decision {
	var verdicts [TotalShards]verdict
	goodCount, lost := 0, 0
	for s := range reads {
		verdicts[s] = judge(ids[s], first, rowLen, reads[s])
		switch verdicts[s] {
		case good:
			goodCount++
		case corrupt, unavailable:
			lost++
		}
	}
	if goodCount < DataShards {
		// Ask for as many unread shards as are still missing, data first.
		var fetch []int
		for s := 0; s < TotalShards && goodCount+len(fetch) < DataShards; s++ {
			if verdicts[s] == unread {
				fetch = append(fetch, s)
			}
		}
		if len(fetch) > 0 {
			return Decision{Fetch: fetch}
		}
		if d, ok := rebuildSectors(enc, ids, first, rowLen, reads, verdicts); ok {
			return d
		}
		if unavailable := lost - countCorrupt(verdicts); unavailable > 0 {
			return Decision{Err: fmt.Errorf("EC row %s: only %d of %d shards verify, %d unavailable: %w",
				ids[0], goodCount, TotalShards, unavailable, ErrUnavailable)}
		}
		return Decision{Err: base.DataLossErrorf(
			"EC row %s: only %d of %d shards verify (need %d)", ids[0], goodCount, TotalShards, DataShards)}
	}
	shards := make([][]byte, TotalShards)
	needRebuild := false
	var repairs []int
	for s := range reads {
		switch verdicts[s] {
		case good:
			shards[s] = reads[s].Data
		case corrupt:
			repairs = append(repairs, s)
			needRebuild = true
		case unavailable:
			if s < DataShards {
				needRebuild = true
			}
		case unread:
			if s < DataShards {
				needRebuild = true
			}
		}
	}
	d := Decision{}
	if needRebuild {
		if err := enc.Reconstruct(shards); err != nil {
			return Decision{Err: base.DataLossErrorf("EC row %s: reconstruct: %v", ids[0], err)}
		}
		d.Reconstructed = true
		// A rebuilt shard must match its own stored checksums when they
		// survived: a second, independent check of the reconstruction.
		for _, s := range repairs {
			if sums := reads[s].Sums; sums != nil && len(sums) == SectorCount(rowLen) {
				if err := VerifyFrom(ids[s], first, shards[s], sums); err != nil {
					return Decision{Err: base.DataLossErrorf(
						"EC row %s: reconstructed shard %d does not verify: %v", ids[0], s, err)}
				}
			}
		}
	}
	data := dst[:0]
	if cap(data) < DataShards*rowLen {
		data = make([]byte, 0, DataShards*rowLen)
	}
	for s := 0; s < DataShards; s++ {
		data = append(data, shards[s]...)
	}
	d.Data = data
	d.Repairs = repairs
	for _, s := range repairs {
		d.RepairData = append(d.RepairData, shards[s])
	}
	return d
}

// rebuildSectors reconstructs an EC row sector by sector when fewer than
// four shards verify whole: Reed-Solomon works byte-wise across shards, so
// each 512 B sector can be decoded from whichever four shards verify at that
// sector. It returns the decision and whether every sector had four
// verified shards and every rebuilt shard matches its own sums. A shard whose
// sums record failed its own CRC still takes part: each of its sectors is
// checked against that record's entry for it (ReplicaRead.DamagedSums).
func rebuildSectors(enc reedsolomon.Encoder, ids [TotalShards]ChunkID, first, rowLen int, reads [TotalShards]ReplicaRead, verdicts [TotalShards]verdict) (Decision, bool) {
	var bad [TotalShards]map[int]bool
	usable := 0
	n := SectorCount(rowLen)
	for s := range reads {
		if (verdicts[s] != good && verdicts[s] != corrupt) || len(reads[s].Data) != rowLen {
			continue
		}
		sums := reads[s].Sums
		if sums == nil && len(reads[s].DamagedSums) >= n {
			// A damaged sums record: each sector is checked against its
			// own entry; the entries the damage hit make their sectors bad.
			sums = reads[s].DamagedSums[:n]
		}
		if len(sums) != n {
			continue
		}
		bad[s] = map[int]bool{}
		for _, sec := range BadSectorsFrom(ids[s], first, reads[s].Data, sums) {
			bad[s][sec] = true
		}
		usable++
	}
	if usable < DataShards {
		return Decision{}, false
	}
	out := make([][]byte, TotalShards)
	for s := range out {
		out[s] = make([]byte, rowLen)
	}
	for sec := 0; sec < SectorCount(rowLen); sec++ {
		lo, hi := sec*SectorSize, min((sec+1)*SectorSize, rowLen)
		part := make([][]byte, TotalShards)
		have := 0
		for s := range reads {
			if bad[s] != nil && !bad[s][sec] {
				part[s] = append([]byte(nil), reads[s].Data[lo:hi]...)
				have++
			}
		}
		if have < DataShards {
			return Decision{}, false
		}
		if err := enc.Reconstruct(part); err != nil {
			return Decision{}, false
		}
		for s := range out {
			copy(out[s][lo:hi], part[s])
		}
	}
	d := Decision{Reconstructed: true}
	for s := range reads {
		if verdicts[s] != corrupt {
			continue
		}
		if sums := reads[s].Sums; len(sums) == SectorCount(rowLen) && VerifyFrom(ids[s], first, out[s], sums) != nil {
			return Decision{}, false
		}
		d.Repairs = append(d.Repairs, s)
		d.RepairData = append(d.RepairData, out[s])
	}
	for s := 0; s < DataShards; s++ {
		d.Data = append(d.Data, out[s]...)
	}
	return d, true
}

// HDFSState is the per-block state of the hdfs baseline reader (DIRECT 000
// section 4.2.1): the replica it currently reads from and the replicas that
// failed once and are never tried again.
type HDFSState struct {
	Current int
	Failed  []bool
}

// NewHDFSState starts a block read on replica 0 of n.
func NewHDFSState(n int) *HDFSState { return &HDFSState{Failed: make([]bool, n)} }

func (s *HDFSState) String() string { return fmt.Sprintf("current=%d failed=%v", s.Current, s.Failed) }

// DecideHDFS is the hdfs baseline decision for the next chunk of a block.
// reads holds what each replica returned for this chunk. A replica that
// fails verification (or is unavailable) is marked failed; reading continues
// from the same offset on the next replica that has not failed; when none is
// left, the block read fails. There is no re-read, no vote and no chunk
// repair: the caller re-replicates the whole block to the failed replicas.
func DecideHDFS(st *HDFSState, id ChunkID, wantLen int, reads []ReplicaRead) Decision {
	for st.Current < len(reads) {
		if st.Failed[st.Current] {
			st.Current++
			continue
		}
		switch judge(id, 0, wantLen, reads[st.Current]) {
		case unread:
			return Decision{Fetch: []int{st.Current}}
		case good:
			return Decision{Data: reads[st.Current].Data}
		default:
			st.Failed[st.Current] = true
			st.Current++
		}
	}
	return Decision{Err: base.DataLossErrorf("block %s: every replica failed (hdfs mode)", id)}
}
