package client_test

import (
	"bytes"
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/direct"
	"github.com/flashmend/flashmend/internal/testseed"
)

// TestInterruptedWriteIsInvisible cancels writes at many points: the key
// keeps showing its previous version, never a partial one.
func TestInterruptedWriteIsInvisible(t *testing.T) {
	seed := testseed.Seed(t, "FLASHMEND_TEST_SEED")
	rng := rand.New(rand.NewSource(seed))
	_, c := startCluster(t, 6, devcluster.Options{})
	ctx := context.Background()
	old := randomBytes(rng, 1000)
	if _, err := c.Put(ctx, "w/key", old, rep); err != nil {
		t.Fatal(err)
	}
	big := randomBytes(rng, 64*direct.ChunkSize)
	interrupted := 0
	for i := 0; i < 8; i++ {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		red := rep
		if i%2 == 1 {
			red = ec
		}
		go func() {
			_, err := c.Put(wctx, "w/key", big, red)
			done <- err
		}()
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
		cancel()
		err := <-done
		got, gerr := c.Get(ctx, "w/key")
		if gerr != nil {
			t.Fatalf("get after interrupted put: %v", gerr)
		}
		if err != nil {
			interrupted++
			if !bytes.Equal(got, old) {
				t.Fatalf("interrupted put (%v) changed the object: %d bytes", err, len(got))
			}
		} else if !bytes.Equal(got, big) {
			t.Fatalf("completed put reads back %d bytes", len(got))
		} else {
			old = big
		}
	}
	t.Logf("%d of 8 puts interrupted", interrupted)
}

// TestReadsDuringOverwrites reads a key while it is overwritten and its old
// versions collected: every read returns one whole version.
func TestReadsDuringOverwrites(t *testing.T) {
	_, c := startCluster(t, 4, devcluster.Options{})
	ctx := context.Background()
	versions := [][]byte{}
	for i := 0; i < 4; i++ {
		versions = append(versions, bytes.Repeat([]byte{byte('a' + i)}, 3*direct.ChunkSize))
	}
	if _, err := c.Put(ctx, "ow", versions[0], rep); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i < 30; i++ {
			if _, err := c.Put(ctx, "ow", versions[i%4], rep); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			t.Logf("%d reads during 30 overwrites", reads)
			return
		default:
		}
		got, err := c.Get(ctx, "ow")
		if err != nil {
			t.Fatalf("read during overwrite: %v", err)
		}
		ok := false
		for _, v := range versions {
			ok = ok || bytes.Equal(got, v)
		}
		if !ok {
			t.Fatalf("read returned a mix of versions")
		}
		reads++
	}
}
