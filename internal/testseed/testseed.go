// Package testseed gives randomized tests their seed and logs it with the
// command that replays it. It is for tests only.
//
// A test's seed is, in order: the value of its environment variable when set
// (to replay a failure); the clock when FLASHMEND_SEEDS=clock (`make soak`:
// new seeds on every run, to find what fixed ones miss); else a seed fixed
// by the test's name (`make test`, CI: a change fails CI for what it
// changed, never for a seed drawn that day).
//
// # Invariants
//
//   - A test that takes its randomness from Rand or Seed logs the seed
//     before it draws anything, so every failure names its seed.
//   - Without the variables, a test's seed is the same on every run and
//     every machine (FNV-1a of its name), and differs between tests.
//
// # Failure model
//
// A variable set to something that is not a decimal int64, or
// FLASHMEND_SEEDS set to anything but "clock" or "fixed", fails the test.
package testseed

import (
	"hash/fnv"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"
)

// ModeEnv selects where seeds come from when a test's own variable is
// unset: "clock" or "fixed" (the default).
const ModeEnv = "FLASHMEND_SEEDS"

// Seed returns the seed of a randomized test: the value of the environment
// variable env if set, else the clock under FLASHMEND_SEEDS=clock, else a
// seed fixed by the test's name. It logs the seed.
func Seed(t testing.TB, env string) int64 {
	t.Helper()
	var seed int64
	from := "fixed by the test's name"
	switch mode := os.Getenv(ModeEnv); mode {
	case "", "fixed":
		h := fnv.New64a()
		_, _ = h.Write([]byte(t.Name()))
		seed = int64(h.Sum64() >> 1)
	case "clock":
		seed = time.Now().UnixNano()
		from = "the clock"
	default:
		t.Fatalf("%s=%q: want clock or fixed", ModeEnv, mode)
	}
	if s := os.Getenv(env); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, s, err)
		}
		seed = v
		from = env
	}
	t.Logf("seed %d from %s (replay with %s=%d)", seed, from, env, seed)
	return seed
}

// Rand is a source seeded by Seed.
func Rand(t testing.TB, env string) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewSource(Seed(t, env)))
}
