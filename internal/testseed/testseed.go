// Package testseed gives randomized tests their seed: from an environment
// variable when it is set (to replay a failure), else from the clock, and
// logs it with the command that replays it. It is for tests only.
//
// # Invariants
//
//   - A test that takes its randomness from Rand or Seed logs the seed
//     before it draws anything, so every failure names its seed.
//
// # Failure model
//
// A variable set to something that is not a decimal int64 fails the test.
package testseed

import (
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

// Seed returns the seed of a randomized test: the value of the environment
// variable env if set, else the clock. It logs the seed.
func Seed(t testing.TB, env string) int64 {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(env); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, env, seed)
	return seed
}

// Rand is a source seeded by Seed.
func Rand(t testing.TB, env string) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewSource(Seed(t, env)))
}
