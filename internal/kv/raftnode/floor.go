package raftnode

import (
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// What a replica whose raft log lost entries it may have acknowledged (a
// vote floor, raftlog.Log.VoteFloor) does differently until a barrier
// entry it proposed has applied here.

// refuseVote drops a vote request for a candidate whose log is behind this
// replica's vote floor (entries the replica may have acknowledged before
// its log lost them: electing that candidate could lose committed entries).
func (n *Node) refuseVote(m *pb.Message) bool {
	if t := m.GetType(); t != pb.MessageType_MsgVote && t != pb.MessageType_MsgPreVote {
		return false
	}
	floorTerm, floorIndex, ok := n.cfg.Log.VoteFloor()
	if !ok {
		return false
	}
	return m.GetLogTerm() < floorTerm || (m.GetLogTerm() == floorTerm && m.GetIndex() < floorIndex)
}

// maybeProposeBarrier proposes, at most once per election timeout, the
// barrier entry (Host.Barrier) that lifts this replica's vote floor once
// applied here.
func (n *Node) maybeProposeBarrier(floorTerm, floorIndex uint64) {
	if n.leader.Load() == 0 {
		return
	}
	n.floorTicks++
	if n.floorTicks%n.cfg.ElectionTicks != 1 {
		return
	}
	if data := n.cfg.Host.Barrier(); data != nil {
		_ = n.rn.Propose(data)
	}
}

// stepDownOnContact handles the first message from a leader after this
// replica's log lost entries it may have acknowledged (stepDownPending):
// it persists a term one past the leader's, recreates the RawNode on it
// and drops the message. Its next reply makes that leader step down; the
// next leader starts with no belief about this replica's log.
func (n *Node) stepDownOnContact(m *pb.Message) bool {
	if !n.stepDownPending {
		return false
	}
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap:
	default:
		return false
	}
	st := n.rn.Status()
	if m.GetTerm() < st.GetTerm() {
		return false
	}
	hs := &pb.HardState{Term: proto.Uint64(m.GetTerm() + 1), Vote: proto.Uint64(0), Commit: proto.Uint64(st.GetCommit())}
	if err := n.cfg.Log.Save(hs, nil, nil); err != nil {
		return false
	}
	rn, err := n.newRawNode(st.Applied)
	if err != nil {
		return false
	}
	n.rn = rn
	n.stepDownPending = false
	return true
}

// clampCommit keeps a heartbeat's commit index within this replica's log.
// A leader sends min(its commit, its match index for us); after this
// replica's log lost entries (cut or recreated), that match index is stale
// and raft would panic on a commit index past our last entry. Our entries
// up to our last index are a prefix of what the leader matched, so
// committing up to there is what the leader meant.
func (n *Node) clampCommit(m *pb.Message) {
	if m.GetType() != pb.MessageType_MsgHeartbeat {
		return
	}
	last, _ := n.cfg.Log.LastIndex()
	if m.GetCommit() > last {
		m.Commit = proto.Uint64(last)
	}
}
