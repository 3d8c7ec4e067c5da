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
	}
}

// DataPathDialOptions are the client's options for its node connections
// (besides credentials and the buffer pool).
func DataPathDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(ChunkCodec{})),
		grpc.WithWriteBufferSize(DataPathBufferBytes), grpc.WithReadBufferSize(DataPathBufferBytes),
	}
}
