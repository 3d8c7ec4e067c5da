package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestPutUnitsAliasAndRecycle puts objects of several sizes, REP and EC,
// from byte slices (a REP write sends its chunks from the caller's slice)
// and from readers (unit buffers that finished writes hand to the next
// ones, with the bytes of the last write still in them), each over the
// one before: the caller's slice is never written to, and every version
// reads back as put.
func TestPutUnitsAliasAndRecycle(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	_, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	sizes := []int{1, direct.ChunkSize - 1, direct.ChunkSize, 3*direct.ChunkSize + 17, 40 * direct.ChunkSize}
	for round := 0; round < 2; round++ {
		for _, red := range []objectpb.Redundancy{rep, ec} {
			for _, size := range sizes {
				key := fmt.Sprintf("units/%v/%d", red, size)
				data := randomBytes(rng, size)
				kept := bytes.Clone(data)
				var err error
				if rng.Intn(2) == 0 {
					_, err = c.Put(ctx, key, data, red)
				} else {
					_, err = c.PutReader(ctx, key, bytes.NewReader(data), int64(size), red)
				}
				if err != nil {
					t.Fatalf("round %d: put %s: %v", round, key, err)
				}
				if !bytes.Equal(data, kept) {
					t.Fatalf("round %d: put %s changed the caller's bytes", round, key)
				}
				got, _, err := c.GetWithReport(ctx, key, client.ModeDefault)
				if err != nil {
					t.Fatalf("round %d: get %s: %v", round, key, err)
				}
				if !bytes.Equal(got, kept) {
					t.Fatalf("round %d: get %s: %d bytes, not what was put", round, key, len(got))
				}
			}
		}
	}
}
