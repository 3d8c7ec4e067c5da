package frames

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/flashmend/flashmend/internal/testseed"
)

// bitmap is the brute-force view of ranges: which bytes of [0, n) they hold.
func bitmap(n int64, rs []Range) []bool {
	out := make([]bool, n)
	for _, r := range rs {
		for i := max(r.Off, 0); i < min(r.End(), n); i++ {
			out[i] = true
		}
	}
	return out
}

// TestNormalizeSubtract checks both against a bitmap on random ranges.
func TestNormalizeSubtract(t *testing.T) {
	rng := testseed.Rand(t, "FRAMES_SEED")
	for run := 0; run < 2000; run++ {
		var rs []Range
		for k := rng.Intn(6); k > 0; k-- {
			rs = append(rs, Range{Off: int64(rng.Intn(60)), Len: int64(rng.Intn(15)) - 2})
		}
		size := int64(rng.Intn(80))
		want := bitmap(100, rs)
		norm := Normalize(append([]Range(nil), rs...))
		if fmt.Sprint(bitmap(100, norm)) != fmt.Sprint(want) {
			t.Fatalf("run %d: Normalize(%v) = %v", run, rs, norm)
		}
		for i := 1; i < len(norm); i++ {
			if norm[i].Off <= norm[i-1].End() || norm[i].Len <= 0 {
				t.Fatalf("run %d: Normalize(%v) = %v: not sorted, disjoint and apart", run, rs, norm)
			}
		}
		sub := Subtract(size, norm)
		got := bitmap(size, sub)
		for i := int64(0); i < size; i++ {
			if got[i] == want[i] {
				t.Fatalf("run %d: Subtract(%d, %v) = %v: byte %d", run, size, norm, sub, i)
			}
		}
	}
}

// damage changes copy c at random: flipped bytes, a junk run, a torn tail.
// It returns the damaged copy and the bytes touched (a truncation touches
// everything after it).
func damage(rng *rand.Rand, c []byte) ([]byte, []bool) {
	c = append([]byte(nil), c...)
	touched := make([]bool, len(c))
	if len(c) == 0 {
		return c, touched
	}
	for k := rng.Intn(3); k > 0; k-- {
		i := rng.Intn(len(c))
		c[i] ^= byte(1 + rng.Intn(255))
		touched[i] = true
	}
	if rng.Intn(3) == 0 {
		i := rng.Intn(len(c))
		for j := i; j < min(len(c), i+rng.Intn(200)); j++ {
			c[j] = byte(rng.Intn(256))
			touched[j] = true
		}
	}
	if rng.Intn(4) == 0 {
		// Junk after the end (a torn write of garbage): no frame is
		// touched, but the copy is not clean.
		junk := make([]byte, 1+rng.Intn(100))
		rng.Read(junk)
		c = append(c, junk...)
		touched = append(touched, make([]bool, len(junk))...)
		return c, touched
	}
	if rng.Intn(4) == 0 {
		n := rng.Intn(len(c))
		for j := n; j < len(c); j++ {
			touched[j] = true
		}
		c = c[:n]
	}
	return c, touched
}

// TestMergeCopies frames random files in three copies, damages some, and
// checks the merge: every byte some copy holds intact is recovered, every
// byte it returns is the file's, a byte is lost only if every copy lost
// it, a seal any copy kept fixes the size, an undamaged copy is perfect,
// and a copy written back from the merge holds what the merge held.
func TestMergeCopies(t *testing.T) {
	rng := testseed.Rand(t, "FRAMES_SEED")
	for run := 0; run < 500; run++ {
		id := rng.Uint64()
		content := make([]byte, rng.Intn(20000))
		rng.Read(content)
		frameBytes := 1 + rng.Intn(MaxBytes)
		sealed := rng.Intn(2) == 0
		whole := Append(nil, id, 0, content, frameBytes)
		if sealed {
			whole = AppendSeal(whole, id, int64(len(content)))
		}
		// The physical extent of every frame of the whole copy.
		frames := Parse(whole)
		var copies []CopyState
		var bufs [][]byte
		holds := make([]bool, len(content)) // some copy holds the byte intact
		sealKept := false
		intact := make([]bool, 3)
		for c := 0; c < 3; c++ {
			buf, touched := whole, make([]bool, len(whole))
			if rng.Intn(2) == 0 {
				buf, touched = damage(rng, whole)
			}
			intact[c] = bytes.Equal(buf, whole)
			bufs = append(bufs, buf)
			for _, f := range frames {
				ok := true
				for p := f.Pos; p < f.Pos+HeaderBytes+int64(len(f.Data)); p++ {
					ok = ok && !touched[p]
				}
				if !ok {
					continue
				}
				if f.Kind == KindSeal {
					sealKept = true
				}
				for i := f.Off; i < f.End(); i++ {
					holds[i] = true
				}
			}
			copies = append(copies, CopyState{Present: true, Physical: int64(len(buf)), Frames: Parse(buf)})
		}
		m := Merge(id, copies)
		what := fmt.Sprintf("run %d (%d bytes, frames of %d, sealed %v)", run, len(content), frameBytes, sealed)
		if sealKept && (!m.Sealed || m.Size != int64(len(content))) {
			t.Fatalf("%s: a seal was kept, merge sealed %v size %d", what, m.Sealed, m.Size)
		}
		if m.Size > int64(len(content)) || m.Conflicts != 0 {
			t.Fatalf("%s: size %d, %d conflicts", what, m.Size, m.Conflicts)
		}
		lost := bitmap(m.Size, m.Lost)
		for i := int64(0); i < m.Size; i++ {
			switch {
			case holds[i] && lost[i]:
				t.Fatalf("%s: byte %d held intact by a copy but lost", what, i)
			case !holds[i] && !lost[i]:
				t.Fatalf("%s: byte %d held by no copy but not lost", what, i)
			case !lost[i] && m.Data[i] != content[i]:
				t.Fatalf("%s: byte %d is %#x, want %#x", what, i, m.Data[i], content[i])
			}
		}
		clean := Encode(m, frameBytes, m.Sealed)
		for c := range copies {
			if intact[c] && !m.Perfect[c] {
				t.Fatalf("%s: undamaged copy %d not perfect", what, c)
			}
			if m.Perfect[c] && !bytes.Equal(bufs[c], clean) {
				t.Fatalf("%s: copy %d perfect but not the clean copy of the merge", what, c)
			}
		}
		back := Merge(id, []CopyState{{Present: true, Frames: Parse(Encode(m, frameBytes, m.Sealed))}})
		if back.Size != m.Size || back.Sealed != m.Sealed || fmt.Sprint(back.Lost) != fmt.Sprint(m.Lost) || !bytes.Equal(back.Data, m.Data) {
			t.Fatalf("%s: the copy written back merges to size %d lost %v, want %d %v", what, back.Size, back.Lost, m.Size, m.Lost)
		}
	}
}

// TestForeignFrames: frames of another file (a stale or misdirected write)
// never enter the merge, and disagreeing verified frames are lost, not
// picked.
func TestForeignFrames(t *testing.T) {
	mine := bytes.Repeat([]byte("a"), 3000)
	other := bytes.Repeat([]byte("b"), 3000)
	c := Append(nil, 1, 0, mine[:1000], 500)
	c = Append(c, 2, 1000, other[:1000], 500) // another file's frames in the middle
	c = Append(c, 1, 2000, mine[2000:], 500)
	m := Merge(1, []CopyState{{Present: true, Physical: int64(len(c)), Frames: Parse(c)}})
	if fmt.Sprint(m.Lost) != "[[1000,2000)]" || !bytes.Equal(m.Data[:1000], mine[:1000]) || m.Perfect[0] {
		t.Fatalf("foreign frames: lost %v perfect %v", m.Lost, m.Perfect)
	}
	d := Append(nil, 1, 0, bytes.Repeat([]byte("c"), 1000), 500)
	m = Merge(1, []CopyState{{Present: true, Frames: Parse(Append(nil, 1, 0, mine[:1000], 500))}, {Present: true, Frames: Parse(d)}})
	if m.Conflicts == 0 || fmt.Sprint(m.Lost) != "[[0,1000)]" || m.Data[0] != 0 {
		t.Fatalf("disagreeing copies: conflicts %d lost %v", m.Conflicts, m.Lost)
	}
}

func TestResolveID(t *testing.T) {
	c := []CopyState{{Frames: Parse(Append(Append(nil, 7, 0, make([]byte, 100), 64), 9, 0, make([]byte, 900), 64))}}
	for _, tc := range []struct {
		named []uint64
		want  uint64
	}{
		{nil, 9},               // no name: the most verified bytes
		{[]uint64{7}, 7},       // the name wins over the bytes
		{[]uint64{7, 9, 7}, 7}, // majority
		{[]uint64{7, 9}, 9},    // a tie: the bytes
	} {
		if got := ResolveID(tc.named, c); got != tc.want {
			t.Errorf("ResolveID(%v) = %d, want %d", tc.named, got, tc.want)
		}
	}
}
