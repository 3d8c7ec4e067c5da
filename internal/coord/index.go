package coord

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/wire"
)

// etcd key layout. Every value is a protobuf followed by its CRC32C.
const (
	prefix          = wire.KeyPrefix
	objectsPrefix   = prefix + "objects/"    // key -> ObjectRecord
	pendingPrefix   = prefix + "pending/"    // %020d version -> PendingPut
	garbagePrefix   = prefix + "garbage/"    // %020d version -> PendingPut (blobs to delete)
	membersPrefix   = prefix + "members/"    // node id -> NodeInfo (permanent)
	mappingPrefix   = prefix + "mapping/"    // key -> MappingEntry
	badPrefix       = prefix + "badreplica/" // %020d version/node -> key (hdfs reports)
	seqVersionKey   = prefix + "seq/version"
	seqNodeKey      = prefix + "seq/node"
	clusterIDKey    = prefix + "cluster-id"
	defaultKeyBytes = 1024
)

func versionKey(p string, version uint64) string { return fmt.Sprintf("%s%020d", p, version) }

// encodeValue marshals m and appends its CRC32C.
func encodeValue(m proto.Message) (string, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return "", err
	}
	return string(binary.LittleEndian.AppendUint32(b, base.CRC32C(b))), nil
}

// decodeValue verifies the CRC32C of an etcd value and unmarshals it.
func decodeValue(key string, v []byte, m proto.Message) error {
	if len(v) < 4 {
		return base.CorruptionErrorf("etcd value %s: truncated", key)
	}
	body := v[:len(v)-4]
	if base.CRC32C(body) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return base.CorruptionErrorf("etcd value %s: checksum mismatch", key)
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return base.CorruptionErrorf("etcd value %s: %v", key, err)
	}
	return nil
}

// ValidateKey checks an object key: 1..maxBytes bytes of UTF-8 without
// control characters.
func ValidateKey(key string, maxBytes int) error {
	if key == "" {
		return base.InvalidArgumentf("empty object key")
	}
	if len(key) > maxBytes {
		return base.InvalidArgumentf("object key of %d bytes exceeds the limit of %d", len(key), maxBytes)
	}
	if !utf8.ValidString(key) {
		return base.InvalidArgumentf("object key is not valid UTF-8")
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return base.InvalidArgumentf("object key contains control characters")
	}
	return nil
}

// Copies is the number of replicas or shards of a redundancy scheme.
func Copies(r objectpb.Redundancy) (int, error) {
	switch r {
	case objectpb.Redundancy_REP:
		return 3, nil
	case objectpb.Redundancy_EC:
		return 6, nil
	}
	return 0, base.InvalidArgumentf("unknown redundancy %v", r)
}

// MappingTable holds the objects whose placement or redundancy differs from
// the default (consistent hashing, REP). The coordinator writes it with
// every commit; Chameleon's balancer will read and change it.
//
// Scale: the etcd implementation keeps one key per entry, so the table is
// bounded by etcd's storage quota (8 GiB recommended maximum; about 100 B
// per entry gives tens of millions of entries, but every entry also costs
// etcd memory for its index). Beyond a few million entries the source /
// destination arrays with epoch-log compaction of Chameleon section IV are
// the way on.
type MappingTable interface {
	Get(ctx context.Context, key string) (*objectpb.MappingEntry, error) // nil when absent
	Put(ctx context.Context, e *objectpb.MappingEntry) error
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, keyPrefix string, limit int) ([]*objectpb.MappingEntry, error)
}

// EtcdMappingTable is the MappingTable in etcd.
type EtcdMappingTable struct{ kv clientv3.KV }

var _ MappingTable = (*EtcdMappingTable)(nil)

func (t *EtcdMappingTable) putOp(e *objectpb.MappingEntry) (clientv3.Op, error) {
	v, err := encodeValue(e)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(mappingPrefix+e.Key, v), nil
}

func (t *EtcdMappingTable) deleteOp(key string) clientv3.Op {
	return clientv3.OpDelete(mappingPrefix + key)
}

// Get implements MappingTable.
func (t *EtcdMappingTable) Get(ctx context.Context, key string) (*objectpb.MappingEntry, error) {
	resp, err := t.kv.Get(ctx, mappingPrefix+key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, err
	}
	e := &objectpb.MappingEntry{}
	return e, decodeValue(string(resp.Kvs[0].Key), resp.Kvs[0].Value, e)
}

// Put implements MappingTable.
func (t *EtcdMappingTable) Put(ctx context.Context, e *objectpb.MappingEntry) error {
	op, err := t.putOp(e)
	if err != nil {
		return err
	}
	_, err = t.kv.Do(ctx, op)
	return err
}

// Delete implements MappingTable.
func (t *EtcdMappingTable) Delete(ctx context.Context, key string) error {
	_, err := t.kv.Do(ctx, t.deleteOp(key))
	return err
}

// List implements MappingTable.
func (t *EtcdMappingTable) List(ctx context.Context, keyPrefix string, limit int) ([]*objectpb.MappingEntry, error) {
	resp, err := t.kv.Get(ctx, mappingPrefix+keyPrefix, clientv3.WithPrefix(), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	var out []*objectpb.MappingEntry
	for _, kv := range resp.Kvs {
		e := &objectpb.MappingEntry{}
		if err := decodeValue(string(kv.Key), kv.Value, e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}
