package base

import "fmt"

// NodeID names a storage node in the cluster. Zero is not a valid node.
type NodeID uint64

func (n NodeID) String() string { return fmt.Sprintf("n%d", uint64(n)) }

// ShardID names a KV range shard (one raft group). Zero is not a valid shard.
type ShardID uint64

func (s ShardID) String() string { return fmt.Sprintf("s%d", uint64(s)) }

// ReplicaID names one replica of a shard (its raft node ID). Zero is invalid.
type ReplicaID uint64

func (r ReplicaID) String() string { return fmt.Sprintf("r%d", uint64(r)) }
