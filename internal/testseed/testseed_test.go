package testseed

import "testing"

func TestFixedSeedsFollowTheName(t *testing.T) {
	t.Setenv(ModeEnv, "")
	t.Setenv("TESTSEED_X", "")
	var a, b int64
	t.Run("a", func(t *testing.T) { a = Seed(t, "TESTSEED_X") })
	t.Run("b", func(t *testing.T) { b = Seed(t, "TESTSEED_X") })
	var a2 int64
	t.Run("a", func(t *testing.T) { a2 = Seed(t, "TESTSEED_X") }) // named a#01
	if a == b || a == a2 {
		t.Fatalf("seeds of distinct tests should differ: %d %d %d", a, b, a2)
	}
	var again int64
	t.Run("a", func(t *testing.T) {}) // a#02: keeps names distinct
	t.Run("b", func(t *testing.T) { again = Seed(t, "TESTSEED_X") })
	if again == b {
		t.Fatalf("b#01 got b's seed %d", b)
	}
	t.Setenv("TESTSEED_X", "42")
	t.Run("c", func(t *testing.T) {
		if s := Seed(t, "TESTSEED_X"); s != 42 {
			t.Fatalf("the variable should win: %d", s)
		}
	})
}

func TestFixedSeedIsStable(t *testing.T) {
	t.Setenv(ModeEnv, "fixed")
	t.Setenv("TESTSEED_X", "")
	// FNV-1a 64 of "TestFixedSeedIsStable", shifted right once: a golden
	// value, so a change to how fixed seeds are made is seen here first.
	if s := Seed(t, "TESTSEED_X"); s != golden {
		t.Fatalf("seed %d, want %d", s, golden)
	}
}

const golden = 7848943209872516281
