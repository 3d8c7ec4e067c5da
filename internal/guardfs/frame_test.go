package guardfs

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashmend/flashmend/internal/guardfs/frames"
)

var update = flag.Bool("update", false, "rewrite golden files")

const testID = 0x0123456789abcdef

// encode writes data as one framed copy: one Write per chunk of writes,
// then a seal if sealed.
func encode(id uint64, writes [][]byte, frameBytes int, sealed bool) []byte {
	var out []byte
	off := int64(0)
	for _, w := range writes {
		out = frames.Append(out, id, off, w, frameBytes)
		off += int64(len(w))
	}
	if sealed {
		out = frames.AppendSeal(out, id, off)
	}
	return out
}

func mergeOf(id uint64, copies ...[]byte) frames.Merged {
	states := make([]frames.CopyState, len(copies))
	for i, c := range copies {
		if c == nil {
			continue
		}
		states[i] = frames.CopyState{Present: true, Physical: int64(len(c)), Frames: frames.Parse(c)}
	}
	return frames.Merge(id, states)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

// TestFrameGolden pins the on-disk frame format: a change to it breaks
// every stored copy, so it must be deliberate (go test -run
// TestFrameGolden -update).
func TestFrameGolden(t *testing.T) {
	out := encode(testID, [][]byte{[]byte("hello, "), []byte("guarded world")}, 8, true)
	var b strings.Builder
	for _, f := range frames.Parse(out) {
		fmt.Fprintf(&b, "%s\n", f)
	}
	b.WriteString(hex.Dump(out))
	golden := filepath.Join("testdata", "frames.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("frame encoding changed:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for _, fb := range []int{64, 512, 4096} {
		var writes [][]byte
		var all []byte
		for i := 0; i < 40; i++ {
			w := randBytes(rng, rng.Intn(3*fb))
			writes = append(writes, w)
			all = append(all, w...)
		}
		for _, sealed := range []bool{false, true} {
			m := mergeOf(testID, encode(testID, writes, fb, sealed))
			if m.Size != int64(len(all)) || !bytes.Equal(m.Data, all) || len(m.Lost) != 0 || m.Sealed != sealed {
				t.Fatalf("frame %d sealed %v: size %d (want %d), lost %v", fb, sealed, m.Size, len(all), m.Lost)
			}
			if !m.Perfect[0] || m.Gaps != 0 {
				t.Fatalf("an intact copy is not perfect (gaps %d)", m.Gaps)
			}
		}
	}
}

// TestMergeFillsFromOtherCopy: damage to different frames of two copies
// loses nothing; the same frame damaged in both is lost, exactly that
// frame, and reported, never served.
func TestMergeFillsFromOtherCopy(t *testing.T) {
	const fb = 64
	data := randBytes(rand.New(rand.NewSource(1)), 10*fb)
	a := encode(testID, [][]byte{data}, fb, true)
	b := bytes.Clone(a)
	step := frames.HeaderBytes + fb
	a[2*step+40] ^= 1         // frame 2 in copy a
	clear(b[5*step : 6*step]) // frame 5 in copy b
	m := mergeOf(testID, a, b)
	if !bytes.Equal(m.Data, data) || len(m.Lost) != 0 {
		t.Fatalf("lost %v", m.Lost)
	}
	if m.Perfect[0] || m.Perfect[1] || m.Gaps != 2 {
		t.Fatalf("perfect %v gaps %d", m.Perfect, m.Gaps)
	}
	b[2*step+30] ^= 0x80 // frame 2 now damaged in both
	m = mergeOf(testID, a, b)
	if len(m.Lost) != 1 || m.Lost[0] != (Range{Off: 2 * fb, Len: fb}) {
		t.Fatalf("lost %v, want [%d,%d)", m.Lost, 2*fb, 3*fb)
	}
	if !bytes.Equal(m.Data[:2*fb], data[:2*fb]) || !bytes.Equal(m.Data[3*fb:], data[3*fb:]) {
		t.Fatal("bytes outside the lost frame differ")
	}
}

// TestResync: junk inserted between frames, a damaged header, or a frame
// whose length field was hit costs only the damaged frame; parsing finds
// the frames after it.
func TestResync(t *testing.T) {
	const fb = 100
	data := randBytes(rand.New(rand.NewSource(2)), 7*fb)
	step := frames.HeaderBytes + fb
	junk := append(append(encode(testID, [][]byte{data[:3*fb]}, fb, false), bytes.Repeat([]byte{0x47}, 333)...),
		encode(testID, [][]byte{data}, fb, true)[3*step:]...)
	if m := mergeOf(testID, junk); len(m.Lost) != 0 || !bytes.Equal(m.Data, data) || m.Perfect[0] {
		t.Errorf("junk between frames: lost %v, perfect %v", m.Lost, m.Perfect[0])
	}
	for name, damage := range map[string]func([]byte) []byte{
		"magic destroyed": func(c []byte) []byte { c[3*step] ^= 0xff; return c },
		"length enlarged": func(c []byte) []byte { c[3*step+6] = 0xff; c[3*step+7] = 0x0f; return c },
		"length shrunk":   func(c []byte) []byte { c[3*step+6] = 1; return c },
		"magic in data": func(c []byte) []byte {
			copy(c[3*step+frames.HeaderBytes+10:], frames.MagicBytes)
			c[3*step+frames.HeaderBytes+50] ^= 1 // and the frame damaged, so its data is scanned
			return c
		},
	} {
		c := damage(encode(testID, [][]byte{data}, fb, true))
		m := mergeOf(testID, c)
		if len(m.Lost) != 1 || m.Lost[0] != (Range{Off: 3 * fb, Len: fb}) {
			t.Errorf("%s: lost %v, want only frame 3", name, m.Lost)
		}
		if !bytes.Equal(m.Data[4*fb:], data[4*fb:]) {
			t.Errorf("%s: frames after the damage not recovered", name)
		}
	}
}

// TestTornTail: a copy cut inside its last frame (a crash during a write)
// is a shorter file, not an error; with a seal in another copy the same
// cut is filled from it, and without any intact tail a sealed file reports
// the missing tail as lost.
func TestTornTail(t *testing.T) {
	const fb = 64
	data := randBytes(rand.New(rand.NewSource(3)), 5*fb+10)
	unsealed := encode(testID, [][]byte{data}, fb, false)
	cut := unsealed[:len(unsealed)-5]
	m := mergeOf(testID, cut)
	if m.Size != 5*fb || len(m.Lost) != 0 || !bytes.Equal(m.Data, data[:5*fb]) {
		t.Fatalf("torn tail: size %d lost %v", m.Size, m.Lost)
	}
	if m.Perfect[0] {
		t.Fatal("a torn copy is perfect")
	}
	sealed := encode(testID, [][]byte{data}, fb, true)
	m = mergeOf(testID, cut, sealed)
	if m.Size != int64(len(data)) || len(m.Lost) != 0 || !bytes.Equal(m.Data, data) {
		t.Fatalf("torn copy + sealed copy: size %d lost %v", m.Size, m.Lost)
	}
	// The last data frame gone from the sealed copy too: the seal says
	// the file is longer, so the tail is lost, not torn.
	step := frames.HeaderBytes + fb
	damaged := bytes.Clone(sealed)
	damaged[5*step+frames.HeaderBytes] ^= 1
	m = mergeOf(testID, cut, damaged)
	if m.Size != int64(len(data)) || len(m.Lost) != 1 || m.Lost[0] != (Range{Off: 5 * fb, Len: 10}) {
		t.Fatalf("lost tail of a sealed file: size %d lost %v", m.Size, m.Lost)
	}
}

// TestIdentityBinding: a frame copied from another file, or from another
// offset of the same file, never verifies as this file's bytes at this
// offset.
func TestIdentityBinding(t *testing.T) {
	const fb = 64
	rng := rand.New(rand.NewSource(4))
	data, other := randBytes(rng, 6*fb), randBytes(rng, 6*fb)
	step := frames.HeaderBytes + fb
	mine := encode(testID, [][]byte{data}, fb, true)
	theirs := encode(testID+1, [][]byte{other}, fb, true)

	// Another file's frame 2 written over this file's frame 2.
	c := bytes.Clone(mine)
	copy(c[2*step:3*step], theirs[2*step:3*step])
	m := mergeOf(testID, c)
	if len(m.Lost) != 1 || m.Lost[0] != (Range{Off: 2 * fb, Len: fb}) {
		t.Fatalf("foreign frame: lost %v", m.Lost)
	}
	if bytes.Equal(m.Data[2*fb:3*fb], other[2*fb:3*fb]) {
		t.Fatal("another file's bytes served")
	}
	// This file's frame 4 written over its frame 1 (a misdirected write):
	// offset 1 is lost, offset 4 still reads right.
	c = bytes.Clone(mine)
	copy(c[1*step:2*step], mine[4*step:5*step])
	m = mergeOf(testID, c)
	if len(m.Lost) != 1 || m.Lost[0] != (Range{Off: fb, Len: fb}) || !bytes.Equal(m.Data[4*fb:5*fb], data[4*fb:5*fb]) {
		t.Fatalf("misplaced frame: lost %v", m.Lost)
	}
	// The same bytes under another identity verify as nothing.
	if m := mergeOf(testID+2, mine); m.Size != 0 || m.Sealed {
		t.Fatalf("frames verified under a foreign identity: size %d", m.Size)
	}
	// A frame whose offset field was rewritten does not verify.
	c = bytes.Clone(mine)
	c[1*step+16] ^= 2
	if m := mergeOf(testID, c); len(m.Lost) != 1 || m.Lost[0] != (Range{Off: fb, Len: fb}) {
		t.Fatalf("rewritten offset: lost %v", m.Lost)
	}
}

func TestResolveID(t *testing.T) {
	const fb = 64
	rng := rand.New(rand.NewSource(5))
	a := encode(1, [][]byte{randBytes(rng, 4*fb)}, fb, true)
	b := encode(2, [][]byte{randBytes(rng, 9*fb)}, fb, true)
	st := func(cs ...[]byte) []frames.CopyState {
		var out []frames.CopyState
		for _, c := range cs {
			out = append(out, frames.CopyState{Present: true, Physical: int64(len(c)), Frames: frames.Parse(c)})
		}
		return out
	}
	// Names decide, whatever the frames say.
	if id := frames.ResolveID([]uint64{1, 1}, st(b, a, a)); id != 1 {
		t.Fatalf("named 1, got %d", id)
	}
	// A tie of names goes to the identity with more verified bytes.
	if id := frames.ResolveID([]uint64{1, 2}, st(a, b)); id != 2 {
		t.Fatalf("tie: got %d", id)
	}
	// No names: the identity holding the most verified data.
	if id := frames.ResolveID(nil, st(a, b)); id != 2 {
		t.Fatalf("unnamed: got %d", id)
	}
	if id := frames.ResolveID(nil, nil); id != 0 {
		t.Fatalf("nothing: got %d", id)
	}
}

// TestMergeRandomized damages copies at random (zeroed and junk blocks,
// bit flips, truncation, deletion) and checks the merge against the
// original: bytes outside the reported lost ranges are always right; a
// byte is reported lost only if no copy holds an intact frame of it; one
// intact copy means nothing is lost.
func TestMergeRandomized(t *testing.T) {
	const seed = 11
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	for trial := 0; trial < 500; trial++ {
		fb := []int{64, 128, 512}[rng.Intn(3)]
		n := 1 + rng.Intn(3)
		var writes [][]byte
		var all []byte
		for i := rng.Intn(20); i >= 0; i-- {
			w := randBytes(rng, 1+rng.Intn(2*fb))
			writes = append(writes, w)
			all = append(all, w...)
		}
		sealed := rng.Intn(2) == 0
		clean := encode(testID, writes, fb, sealed)
		copies := make([][]byte, n)
		intact := false
		for i := range copies {
			c := bytes.Clone(clean)
			switch rng.Intn(6) {
			case 0:
				intact = true
			case 1:
				lo := rng.Intn(len(c))
				clear(c[lo:min(len(c), lo+1+rng.Intn(700))])
			case 2:
				lo := rng.Intn(len(c))
				rng.Read(c[lo:min(len(c), lo+1+rng.Intn(700))])
			case 3:
				for k := rng.Intn(4); k >= 0; k-- {
					bit := rng.Intn(len(c) * 8)
					c[bit/8] ^= 1 << (bit % 8)
				}
			case 4:
				c = c[:rng.Intn(len(c))]
			case 5:
				c = nil
			}
			copies[i] = c
		}
		m := mergeOf(testID, copies...)
		if m.Size > int64(len(all)) {
			t.Fatalf("trial %d: size %d past the written %d", trial, m.Size, len(all))
		}
		for _, h := range frames.Subtract(m.Size, m.Lost) {
			if !bytes.Equal(m.Data[h.Off:h.End()], all[h.Off:h.End()]) {
				t.Fatalf("trial %d: wrong bytes in %s", trial, h)
			}
		}
		if intact && (m.Size != int64(len(all)) || len(m.Lost) != 0) {
			t.Fatalf("trial %d: an intact copy, yet size %d of %d, lost %v", trial, m.Size, len(all), m.Lost)
		}
	}
}

func TestSidecarRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	rs := []rangeCopy{{Range{Off: 100, Len: 50}, randBytes(rng, 50)}, {Range{Off: 4000, Len: 700}, randBytes(rng, 700)}}
	content := encodeSidecar(5000, rs, 64)
	c := encode(testID, [][]byte{content}, 64, true)
	sc, err := decodeSidecar(mergeOf(testID, c))
	if err != nil || sc.size != 5000 || len(sc.ranges) != 2 || len(sc.lost) != 0 {
		t.Fatalf("%+v %v", sc, err)
	}
	for i := range rs {
		if sc.ranges[i].Range != rs[i].Range || !bytes.Equal(sc.ranges[i].data, rs[i].data) {
			t.Fatalf("range %d differs", i)
		}
	}
	// A frame inside the second range's data lost: only that frame's
	// bytes lose their copy; the rest of the range and the first keep it.
	step := frames.HeaderBytes + 64
	const dataOff = 64                 // header and table (56 B) padded to a frame
	frame := (dataOff + 50 + 100) / 64 // the frame holding byte 100 of the second range
	d := bytes.Clone(c)
	d[frame*step+frames.HeaderBytes+3] ^= 1
	sc, err = decodeSidecar(mergeOf(testID, d))
	lostLo := int64(frame*64 - dataOff - 50)
	want := Range{Off: 4000 + lostLo, Len: 64}
	if err != nil || len(sc.lost) != 1 || sc.lost[0] != want || len(sc.ranges) != 3 ||
		sc.ranges[0].Range != rs[0].Range || sc.ranges[1].Range != (Range{Off: 4000, Len: lostLo}) ||
		sc.ranges[2].Range != (Range{Off: want.End(), Len: 4700 - want.End()}) {
		t.Fatalf("damaged range data: lost %v, ranges %v, %v", sc.lost, sc.ranges, err)
	}
	if !bytes.Equal(sc.ranges[2].data, rs[1].data[want.End()-4000:]) {
		t.Fatal("the copy after the lost frame differs")
	}
	// The header lost: the sidecar is unusable.
	d = bytes.Clone(c)
	d[frames.HeaderBytes+1] ^= 1
	if _, err := decodeSidecar(mergeOf(testID, d)); err == nil {
		t.Fatal("a sidecar without its header decoded")
	}
}

func TestParseReserved(t *testing.T) {
	for entry, want := range map[string]struct {
		name    string
		sidecar bool
		ok      bool
	}{
		reservedName(kindCopy, 2, 0xabc, "MANIFEST-000001"):                    {"MANIFEST-000001", false, true},
		reservedName(kindSidecar, 0, 1, "000005.sst"):                          {"000005.sst", true, true},
		reservedName(kindCopy, 1, 7, "marker.manifest.000002.MANIFEST-000009"): {"marker.manifest.000002.MANIFEST-000009", false, true},
		"t.0123456789abcdef.tmp":                                               {},
		"MANIFEST-000001.1":                                                    {},
	} {
		name, sidecar, ok := ParseReserved(entry)
		if name != want.name || sidecar != want.sidecar || ok != want.ok {
			t.Errorf("%s: %q %v %v", entry, name, sidecar, ok)
		}
	}
}
