package kvserver

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// The raft transport between nodes: every node has one queue and one
// long-lived gRPC stream (Replication.Stream) per peer node, shared by all
// shards, and sends each batch of queued messages on it without waiting
// for the previous one to be answered.
//
// NB: it used one unary call per batch, which waited for its answer
// before the next batch could go: a put at concurrency 1 took seven such
// calls (the client's, the leader's appends to two followers, their
// answers, the commit), each a HEADERS and DATA frame both ways and a
// round trip on the path. On a stream a batch is one DATA frame one way.
// etcd's rafthttp keeps such streams for the same reason.

// maxPeerQueue bounds the raft messages queued for one node; more are
// dropped (raft retransmits).
const maxPeerQueue = 8192

// streamSendTimeout bounds one batch's wait for the stream's flow control
// (a peer that stopped reading, a paused process): the stream is then cut
// and opened again for the next batch, and what was queued meanwhile past
// maxPeerQueue is dropped, as raft allows.
const streamSendTimeout = 2 * time.Second

type peer struct {
	to    base.NodeID
	mu    sync.Mutex
	queue []*kvpb.RaftMessage
	sig   chan struct{}
}

func (n *Node) peerFor(to base.NodeID) *peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.peers[to]; ok {
		return p
	}
	p := &peer{to: to, sig: make(chan struct{}, 1)}
	n.peers[to] = p
	select {
	case <-n.stop:
	default:
		n.wg.Add(1)
		go n.sendLoop(p)
	}
	return p
}

// SendRaft routes a replica's outgoing messages to their nodes' queues
// (kv.Transport).
func (n *Node) SendRaft(shard base.ShardID, msgs []*pb.Message) {
	spec, ok := n.cfg.Layout.Shard(shard)
	if !ok {
		return
	}
	for _, m := range msgs {
		to, ok := spec.Replicas[base.ReplicaID(m.GetTo())]
		if !ok {
			continue
		}
		data, err := proto.Marshal(m)
		if err != nil {
			continue
		}
		p := n.peerFor(to)
		p.mu.Lock()
		if len(p.queue) < maxPeerQueue {
			p.queue = append(p.queue, &kvpb.RaftMessage{Shard: uint64(shard), Message: data})
		}
		p.mu.Unlock()
		select {
		case p.sig <- struct{}{}:
		default:
		}
	}
}

// raftStream is an open stream to one peer, on the connection it was
// opened on.
type raftStream struct {
	cc     *grpc.ClientConn
	s      kvpb.Replication_StreamClient
	cancel context.CancelFunc
}

func (st *raftStream) close() {
	if st != nil {
		st.cancel()
	}
}

// sendLoop sends peer p's queued messages on its stream, opening it when
// there is none (or the peer's connection changed) and dropping it when a
// send fails: the batch is lost (raft retransmits) and the next one opens
// a new stream.
func (n *Node) sendLoop(p *peer) {
	defer n.wg.Done()
	var st *raftStream
	defer func() { st.close() }()
	for {
		select {
		case <-p.sig:
		case <-n.stop:
			return
		}
		p.mu.Lock()
		queued := p.queue
		p.queue = nil
		p.mu.Unlock()
		if len(queued) == 0 {
			continue
		}
		c, err := n.conn(p.to)
		if err != nil {
			continue
		}
		if st != nil && st.cc != c {
			st.close()
			st = nil
		}
		if st == nil {
			if st, err = n.openStream(c); err != nil {
				n.noteErr(p.to, err)
				continue
			}
		}
		for _, batch := range splitBatch(queued, maxBatchBytes) {
			if err := st.send(&kvpb.RaftBatch{FromNode: uint64(n.cfg.ID), Messages: batch}); err != nil {
				st.close()
				st = nil
				n.noteErr(p.to, err)
				break
			}
		}
	}
}

func (n *Node) openStream(c *grpc.ClientConn) (*raftStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := kvpb.NewReplicationClient(c).Stream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &raftStream{cc: c, s: s, cancel: cancel}, nil
}

// send sends one batch, waiting at most streamSendTimeout for the stream's
// flow control. A stream the server ended says why on its status.
func (st *raftStream) send(b *kvpb.RaftBatch) error {
	t := time.AfterFunc(streamSendTimeout, st.cancel)
	err := st.s.Send(b)
	t.Stop()
	if errors.Is(err, io.EOF) {
		_, err = st.s.CloseAndRecv()
		if err == nil {
			err = status.Error(codes.Unavailable, "kv: raft stream ended by the peer")
		}
	}
	return err
}

// maxBatchBytes keeps one RaftBatch well under gRPC's default 4 MiB receive
// limit (raft messages are at most 1 MiB of entries each).
const maxBatchBytes = 2 << 20

// splitBatch cuts msgs into batches of at most maxBytes of message data (a
// single larger message goes alone).
func splitBatch(msgs []*kvpb.RaftMessage, maxBytes int) [][]*kvpb.RaftMessage {
	var out [][]*kvpb.RaftMessage
	var cur []*kvpb.RaftMessage
	size := 0
	for _, m := range msgs {
		if len(cur) > 0 && size+len(m.Message) > maxBytes {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, m)
		size += len(m.Message)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// ---- receiving -------------------------------------------------------------

// step hands a batch's messages to their replicas (a message for a shard
// this node does not hold, or one that does not decode, is dropped).
func (s *replicationServer) step(b *kvpb.RaftBatch) {
	for _, rm := range b.Messages {
		r, err := s.svc.replica(rm.Shard)
		if err != nil {
			continue
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(rm.Message, m); err != nil {
			continue
		}
		r.Step(m)
	}
}

func (s *replicationServer) Send(_ context.Context, b *kvpb.RaftBatch) (*kvpb.RaftAck, error) {
	s.step(b)
	return &kvpb.RaftAck{}, nil
}

// Stream receives a peer's batches until the peer ends the stream, the
// call ends, or the service drains (Service.Drain: a gRPC server's
// graceful stop waits for every open stream, and a peer's never ends on
// its own).
func (s *replicationServer) Stream(st kvpb.Replication_StreamServer) error {
	recvd := make(chan error, 1)
	go func() {
		for {
			b, err := st.Recv()
			if err != nil {
				recvd <- err
				return
			}
			s.step(b)
		}
	}()
	select {
	case err := <-recvd:
		if errors.Is(err, io.EOF) {
			return st.SendAndClose(&kvpb.RaftAck{})
		}
		return err
	case <-s.svc.draining():
		return status.Error(codes.Unavailable, "kv: node stopping")
	}
}

// draining returns a channel closed by Drain.
func (svc *Service) draining() <-chan struct{} {
	svc.drainMu.Lock()
	defer svc.drainMu.Unlock()
	if svc.drained == nil {
		svc.drained = make(chan struct{})
	}
	return svc.drained
}

// Drain ends the raft streams peers opened to this node and refuses new
// ones: call it before a graceful stop of the gRPC server the services are
// registered on (grpc.Server.GracefulStop waits for every open stream).
func (svc *Service) Drain() {
	svc.drainMu.Lock()
	defer svc.drainMu.Unlock()
	if svc.drained == nil {
		svc.drained = make(chan struct{})
	}
	select {
	case <-svc.drained:
	default:
		close(svc.drained)
	}
}
