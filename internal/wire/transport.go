package wire

import "google.golang.org/grpc"

// DataPathBufferBytes is the gRPC transport's read and write buffer size on
// the chunk data path (the node's server, the client's node connections).
//
// NB: gRPC's defaults (32 KiB each) split one 64 KiB chunk message into at
// least two socket writes on the sender and three reads on the receiver;
// the system calls were the largest part of a GET's CPU (docs/results/
// datapath.md). A larger buffer lets the transport's writer batch the
// frames of several queued chunks into one write, and the reader take them
// in one read. It costs one buffer of each per connection, not per RPC (the
// write buffer is returned to a pool between flushes).
const DataPathBufferBytes = 256 << 10

// DataPathServerOptions are the node server's transport options of the
// chunk data path: its buffer pool and codec (see ChunkBufferPool) and
// transport buffers.
func DataPathServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(ChunkCodec{}),
		grpc.WriteBufferSize(DataPathBufferBytes), grpc.ReadBufferSize(DataPathBufferBytes),
		grpc.InitialWindowSize(DataPathStreamWindow), grpc.InitialConnWindowSize(DataPathConnWindow),
	}
}

// DataPathDialOptions are the client's options for its node connections
// (besides credentials and the buffer pool).
func DataPathDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(ChunkCodec{})),
		grpc.WithWriteBufferSize(DataPathBufferBytes), grpc.WithReadBufferSize(DataPathBufferBytes),
		grpc.WithInitialWindowSize(DataPathStreamWindow), grpc.WithInitialConnWindowSize(DataPathConnWindow),
	}
}

// DataPathStreamWindow and DataPathConnWindow are the HTTP/2 flow-control
// windows the data path's receivers (the client's node connections for
// reads, the node's server for writes) grant: per stream and per
// connection. They bound what a sender may have in flight, unacknowledged,
// so what a receiver buffers: at most DataPathConnWindow per connection
// beyond what the reading code holds (a GET's window, a node's chunk being
// stored).
//
// NB: gRPC's default starts at 64 KiB and grows the windows by estimating
// the bandwidth-delay product (up to 16 MiB per connection), which costs a
// ping per estimate, and on loopback keeps them small: a chunk's 64 KiB
// waited on window updates, each a small write and read of its own. Set,
// the windows are fixed (no estimate) and a 64 KiB chunk never waits on
// one. `go test -bench 'GetFiles/REP|Put$/REP' ./internal/client` reports
// the reads and writes per object.
const (
	DataPathStreamWindow = 1 << 20
	DataPathConnWindow   = 4 << 20
)
