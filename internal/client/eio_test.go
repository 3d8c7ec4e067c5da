package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"sync"
	"syscall"
	"testing"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/objstore"
	"github.com/flashmend/flashmend/internal/objstore/filestore"
	"github.com/flashmend/flashmend/internal/testseed"
)

// badSectorStore is a node's plain-file store where reads of some files
// fail with EIO, as a bad sector under them would, until the file is
// written anew (out of place: the new bytes land elsewhere on the device).
type badSectorStore struct {
	*filestore.Store
	mu       sync.Mutex
	bad      map[string]bool
	injected int
}

func (s *badSectorStore) fail(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bad[name] {
		s.injected++
		return fmt.Errorf("read %s: bad sector: %w", name, syscall.EIO)
	}
	return nil
}

func (s *badSectorStore) healed(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.bad, name)
}

func (s *badSectorStore) isBad(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad[name]
}

func (s *badSectorStore) setBad(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad[name] = true
}

func (s *badSectorStore) Get(name string) ([]byte, error) {
	if err := s.fail(name); err != nil {
		return nil, err
	}
	return s.Store.Get(name)
}

func (s *badSectorStore) GetRange(name string, off, n int64) ([]byte, error) {
	if err := s.fail(name); err != nil {
		return nil, err
	}
	return s.Store.GetRange(name, off, n)
}

func (s *badSectorStore) Put(name string, data []byte) error {
	err := s.Store.Put(name, data)
	if err == nil {
		s.healed(name)
	}
	return err
}

func (s *badSectorStore) Create(name string, data []byte) error {
	err := s.Store.Create(name, data)
	if err == nil {
		s.healed(name)
	}
	return err
}

// TestEIOOnChunkOrSumsFileIsRepaired is the regression test of the torture
// harness's object CORDS cells "chunk data / EIO read" and "sums file / EIO
// read": the read was served from the other copies, but nothing rewrote
// the copy the device could not read, so the object stayed one failure
// closer to loss without anyone knowing. Now a chunk or sums record the
// device cannot read counts as corrupt: the read serves another copy and
// rewrites that one (out of place), as for a checksum mismatch; a scrub
// does the same for a copy no read reached.
func TestEIOOnChunkOrSumsFileIsRepaired(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	var mu sync.Mutex
	stores := map[int]*badSectorStore{}
	// A tiny repair reserve: the test is about read errors, not the
	// free space of the machine it runs on.
	opts := devcluster.Options{RepairReserve: 1e-6, NodeStore: func(dir string, i int) (objstore.Store, error) {
		fs, err := filestore.Open(dir, false)
		if err != nil {
			return nil, err
		}
		s := &badSectorStore{Store: fs, bad: map[string]bool{}}
		mu.Lock()
		stores[i] = s
		mu.Unlock()
		return s, nil
	}}
	cl, c := startCluster(t, 6, opts)
	ctx := context.Background()
	for _, red := range []objectpb.Redundancy{rep, ec} {
		for _, file := range []string{"chunk data", "sums file"} {
			t.Run(red.String()+"/"+file, func(t *testing.T) {
				data := randomBytes(rng, 4*direct.ChunkSize+100)
				key := "eio/" + red.String() + "/" + file
				rec, err := c.Put(ctx, key, data, red)
				if err != nil {
					t.Fatal(err)
				}
				r := rng.Intn(len(rec.Placement))
				shard := uint32(0)
				if red == ec {
					shard = uint32(r)
				}
				rows := (len(data) + direct.ChunkSize - 1) / direct.ChunkSize // chunks of a replica
				if red == ec {
					rows = (rows + direct.DataShards - 1) / direct.DataShards // chunks of a shard
				}
				cid := direct.ChunkID{Object: rec.Object, Version: rec.Version, Shard: shard, Index: uint32(rng.Intn(rows))}
				name := objstore.DataName(cid)
				if file == "sums file" {
					name = objstore.SumsName(cid)
				}
				node := int(rec.Placement[r] - 1)
				mu.Lock()
				s := stores[node]
				mu.Unlock()
				before := cl.Node(node).Chunks().Stats()
				s.setBad(name)
				t.Logf("EIO on %s of node %d (replica or shard %d)", name, node+1, r)
				got, report, err := c.GetWithReport(ctx, key, client.ModeDirect)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read with an unreadable %s: %v (%s)", file, err, report)
				}
				t.Logf("read: %s", report)
				// The read may have served other copies before it reached
				// this one; and an unreadable sums file takes the records of
				// the other chunks it holds with it (they are left empty when
				// one is rewritten): the scrub reads every copy of every chunk.
				report, err = c.ScrubObject(ctx, rec, nil, nil)
				if err != nil {
					t.Fatalf("scrub: %v (%s)", err, report)
				}
				t.Logf("scrub: %s", report)
				if s.isBad(name) {
					t.Fatalf("%s of node %d still unreadable: not rewritten", name, node+1)
				}
				after := cl.Node(node).Chunks().Stats()
				if after.ReadErrors == before.ReadErrors || after.Repaired == before.Repaired {
					t.Fatalf("node %d counted %d read errors and %d repairs", node+1,
						after.ReadErrors-before.ReadErrors, after.Repaired-before.Repaired)
				}
				// Every copy of every chunk verifies on the nodes now.
				for i := 0; i < rows; i++ {
					storeIsClean(t, cl, rec, i)
				}
				if got, err := c.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read after the repair: %v", err)
				}
				if report, err := c.ScrubObject(ctx, rec, nil, nil); err != nil || report.Repaired != 0 {
					t.Fatalf("second scrub: %v (%s)", err, report)
				}
			})
		}
	}
}
