package wire

import (
	"strconv"

	"github.com/flashmend/flashmend/internal/base"
)

// KeyPrefix is the etcd prefix under which flashmend keeps every key.
const KeyPrefix = "/flashmend/"

// LivePrefix is the etcd prefix of the nodes' leased liveness keys; the
// value is a coordpb.NodeInfo with the node's address and statistics.
const LivePrefix = KeyPrefix + "live/"

// LiveKey is the liveness key of node id.
func LiveKey(id base.NodeID) string { return LivePrefix + strconv.FormatUint(uint64(id), 10) }
