// Package raftnode is one KV replica's member of its shard's raft group
// (go.etcd.io/raft/v3 RawNode): the loop that drives the RawNode, and the
// repair of the replica's raft log from its peers before raft starts.
// internal/kv's Replica runs it; the replica's transport, apply worker and
// proposals meet it through Host and a few calls.
//
// # What it owns
//
//   - Node: the RawNode, owned by one loop goroutine (Run) that takes
//     ticks of the injected clock, proposals, peers' messages, read index
//     requests and leadership transfers, and after each persists the
//     Ready to the raft log (internal/raftlog) before it sends its
//     messages (Host.Send) and hands committed entries and snapshot points
//     to the apply worker (Host.Apply). Raft itself stays pure: no disk,
//     network or clock but through this loop.
//   - Group commit: before it persists a Ready the loop takes what is
//     already queued (proposals, peers' messages; Config.MaxBatch), so one
//     raft log write, with one sync per copy, carries the entries of many
//     proposals, each still an entry of its own with its own result; read
//     index requests queued together share one raft read index (one
//     heartbeat round), as etcd's server coalesces its linearizable reads.
//   - The vote floor (raftlog.Log.VoteFloor) of a replica whose log lost
//     entries it may have acknowledged: it does not campaign, refuses
//     votes for candidates behind the floor, moves past the leader's term
//     at first contact (the leader steps down and the next one probes its
//     log afresh), clamps a heartbeat's commit index to its log, and
//     proposes a barrier entry (Host.Barrier) once per election timeout
//     until one applies.
//   - Leadership handoff: TransferLeadership hands leadership to the most
//     caught-up follower (a replica about to wait for a patch of its own
//     does not lead meanwhile).
//   - RepairLog: holes of a raft log that lost entries in both copies are
//     filled from the peers' logs, hole by hole, then the log is sealed,
//     or cut past a timeout where no peer had the entries.
//
// # Invariants
//
//   - Invariant: nothing is applied, and no follower or candidate sends
//     anything, before the Ready that carries it is persisted; a Ready
//     the log cannot persist stops the loop (Run returns its error) and
//     the replica takes no further part. The leader sends a Ready that
//     changes neither term nor vote while it persists it (Raft thesis
//     10.2.1, as etcd's server does; MaxBatch 1 does not): its log write
//     overlaps the followers', and since the loop steps their replies only
//     after the Ready is persisted, nothing commits on a copy of the
//     leader's that is not durable.
//   - A replica under a vote floor never votes for, or helps elect, a
//     candidate whose log ends before the floor.
//   - Ticks, timeouts and backoffs are on Config.Clock (base.After,
//     base.NewTicker): on a base.ManualClock the group moves only when the
//     clock does (TestGroupOnManualClock).
//
// # Failure model
//
// Messages may be lost, repeated or reordered (raft's own model); a full
// queue drops a received message. A proposal raft refuses (no leader)
// comes back through Host.Dropped and a read index it drops times out
// (ErrNotConfirmed). A log write that fails stops the node. A log repair
// that no peer can finish in time cuts the entries no peer holds (the
// leader sends them again; raftlog keeps a vote floor meanwhile).
package raftnode
