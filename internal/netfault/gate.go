package netfault

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
)

// fromKey is the metadata key under which a gated process names itself on
// every call it makes.
const fromKey = "flashmend-nemesis-from"

// Coordinator is the name the coordinator goes by at a gate: a node that
// blocks it is cut off from the coordinator and its embedded etcd (the
// node's calls to them fail at its client interceptors, and the
// coordinator's calls to the node, which name it through Naming, fail at
// the node's server). Node IDs never reach it.
const Coordinator base.NodeID = math.MaxUint64

// peerName is how the control endpoint writes a peer.
func peerName(p base.NodeID) string {
	if p == Coordinator {
		return "coordinator"
	}
	return strconv.FormatUint(uint64(p), 10)
}

// describe names a process in an error: "node 3" or "the coordinator".
func describe(p base.NodeID) string {
	if p == Coordinator {
		return "the coordinator"
	}
	return fmt.Sprintf("node %d", p)
}

// parsePeers reads a control request's peers: node IDs and "coordinator",
// comma separated.
func parsePeers(list string) ([]base.NodeID, error) {
	var peers []base.NodeID
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if f == "coordinator" {
			peers = append(peers, Coordinator)
			continue
		}
		id, err := strconv.ParseUint(f, 10, 64)
		if err != nil || id == 0 || base.NodeID(id) == Coordinator {
			return nil, fmt.Errorf("netfault: bad peer %q: want node IDs or \"coordinator\", comma separated", f)
		}
		peers = append(peers, base.NodeID(id))
	}
	return peers, nil
}

// Gate is one process's set of peers it is cut off from.
type Gate struct {
	mu      sync.RWMutex
	self    base.NodeID
	blocked map[base.NodeID]bool
	cuts    uint64 // calls and messages failed, for the harness's report
	// changed is closed (and replaced) whenever the blocked set changes:
	// calls waiting for a link to heal wake on it.
	changed chan struct{}
}

// New returns the gate of node self, with nothing blocked. A process that
// learns its ID later (a node the coordinator numbers) passes 0 and calls
// SetSelf before it serves or dials.
func New(self base.NodeID) *Gate {
	return &Gate{self: self, blocked: map[base.NodeID]bool{}, changed: make(chan struct{})}
}

// SetSelf sets the node ID the process names itself by.
func (g *Gate) SetSelf(id base.NodeID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.self = id
	delete(g.blocked, id)
}

func (g *Gate) id() base.NodeID {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.self
}

// Block cuts the process off from peers (added to those already cut).
func (g *Gate) Block(peers ...base.NodeID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range peers {
		if p != g.self && p != 0 {
			g.blocked[p] = true
		}
	}
	g.notify()
}

// notify wakes the calls waiting for a link; g.mu is held.
func (g *Gate) notify() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// Set replaces the set of peers cut off (none: everything passes); unlike
// Heal it keeps counting cuts, so a harness that holds several partitions
// at once can change one without losing what the others cut.
func (g *Gate) Set(peers ...base.NodeID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.blocked)
	for _, p := range peers {
		if p != g.self && p != 0 {
			g.blocked[p] = true
		}
	}
	g.notify()
}

// Heal lets every peer through again, and starts counting cuts afresh.
func (g *Gate) Heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.blocked)
	g.cuts = 0
	g.notify()
}

// Blocked returns the peers cut off now, in order.
func (g *Gate) Blocked() []base.NodeID {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]base.NodeID, 0, len(g.blocked))
	for p := range g.blocked {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Cuts returns how many calls and stream messages the gate has failed
// since it was last healed.
func (g *Gate) Cuts() uint64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.cuts
}

// cut says whether peer is cut off, and counts the cut.
func (g *Gate) cut(peer base.NodeID) error {
	g.mu.RLock()
	blocked := g.blocked[peer]
	g.mu.RUnlock()
	if !blocked {
		return nil
	}
	g.mu.Lock()
	g.cuts++
	self := g.self
	g.mu.Unlock()
	return status.Errorf(codes.Unavailable, "netfault: %s is cut off from %s (nemesis partition)", describe(self), describe(peer))
}

// await is cut for a call that waits for ready (gRPC's WaitForReady, as
// etcd's client makes its calls): over a cut link it waits until the link
// heals or ctx ends, as such a call waits while a real partition keeps
// the connection down, instead of failing at once (its caller would retry
// in a tight loop).
func (g *Gate) await(ctx context.Context, peer base.NodeID) error {
	counted := false
	for {
		g.mu.Lock()
		blocked, changed := g.blocked[peer], g.changed
		if blocked && !counted {
			g.cuts++
			counted = true
		}
		g.mu.Unlock()
		if !blocked {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// waitsForReady says whether a call's options (the connection's defaults
// among them) make it wait for a ready connection.
func waitsForReady(opts []grpc.CallOption) bool {
	wait := false
	for _, o := range opts {
		if ff, ok := o.(grpc.FailFastCallOption); ok {
			wait = !ff.FailFast
		}
	}
	return wait
}

// DialOptions returns the options of a connection to peer: every call and
// stream message fails while the peer is cut off, and every call names
// this process. A nil gate returns none.
func (g *Gate) DialOptions(peer base.NodeID) []grpc.DialOption {
	if g == nil {
		return nil
	}
	check := func(ctx context.Context, opts []grpc.CallOption) error {
		if waitsForReady(opts) {
			return g.await(ctx, peer)
		}
		return g.cut(peer)
	}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := check(ctx, opts); err != nil {
			return err
		}
		from := strconv.FormatUint(uint64(g.id()), 10)
		return invoker(metadata.AppendToOutgoingContext(ctx, fromKey, from), method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := check(ctx, opts); err != nil {
			return nil, err
		}
		from := strconv.FormatUint(uint64(g.id()), 10)
		s, err := streamer(metadata.AppendToOutgoingContext(ctx, fromKey, from), desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &clientStream{ClientStream: s, check: func() error { return g.cut(peer) }}, nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// Naming returns the options of a connection that name this process on
// every call and stream, and cut nothing: the coordinator's connections to
// nodes carry it (as Coordinator), so that a node's gate can refuse the
// coordinator's calls. The coordinator itself keeps no gate: a partition
// between it and a node is made at the node's end, both ways.
func Naming(self base.NodeID) []grpc.DialOption {
	from := strconv.FormatUint(uint64(self), 10)
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, fromKey, from), method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(metadata.AppendToOutgoingContext(ctx, fromKey, from), desc, cc, method, opts...)
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

// ServerOptions returns the options of the process's gRPC server: a call
// or stream message from a peer cut off fails. Calls that name no sender
// (clients outside the cluster) pass. A nil gate returns none.
func (g *Gate) ServerOptions() []grpc.ServerOption {
	if g == nil {
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := g.cutFrom(ctx); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := g.cutFrom(ss.Context()); err != nil {
			return err
		}
		return handler(srv, &serverStream{ServerStream: ss, check: func() error { return g.cutFrom(ss.Context()) }})
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// cutFrom says whether the caller of an incoming call is cut off.
func (g *Gate) cutFrom(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(fromKey) {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue
		}
		if err := g.cut(base.NodeID(id)); err != nil {
			return err
		}
	}
	return nil
}

type clientStream struct {
	grpc.ClientStream
	check func() error
}

func (s *clientStream) SendMsg(m any) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.ClientStream.SendMsg(m)
}

func (s *clientStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	// A message that arrives while the link is cut is lost.
	return s.check()
}

type serverStream struct {
	grpc.ServerStream
	check func() error
}

func (s *serverStream) SendMsg(m any) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.ServerStream.SendMsg(m)
}

func (s *serverStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.check()
}

// ServeHTTP is the control endpoint the harness sets the gate through:
//
//	POST /block?peers=2,3   cut the process off from nodes 2 and 3 (added)
//	POST /set?peers=2,coordinator   cut it off from exactly these (none: from nobody)
//	POST /heal              let everything through, count cuts afresh
//	GET  /                  the peers cut off, one line: "blocked 2,3 cuts N"
//
// A peer is a node ID or "coordinator". A rejected request changes nothing.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case (r.URL.Path == "/block" || r.URL.Path == "/set") && r.Method == http.MethodPost:
		peers, err := parsePeers(r.URL.Query().Get("peers"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/set" {
			g.Set(peers...)
			break
		}
		if len(peers) == 0 {
			http.Error(w, "netfault: /block needs peers=ID[,ID...]", http.StatusBadRequest)
			return
		}
		g.Block(peers...)
	case r.URL.Path == "/heal" && r.Method == http.MethodPost:
		g.Heal()
	case r.URL.Path == "/" && r.Method == http.MethodGet:
	default:
		http.Error(w, "netfault: POST /block?peers=ID,..., POST /set?peers=ID,..., POST /heal or GET /", http.StatusNotFound)
		return
	}
	var ids []string
	for _, p := range g.Blocked() {
		ids = append(ids, peerName(p))
	}
	fmt.Fprintf(w, "blocked %s cuts %d\n", strings.Join(ids, ","), g.Cuts())
}
