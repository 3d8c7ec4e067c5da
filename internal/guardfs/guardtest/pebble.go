package guardtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// quietLogger drops Pebble's info logs; its fatal logs fail the test.
type quietLogger struct{ t testing.TB }

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(string, ...any)          {}
func (l quietLogger) Fatalf(f string, args ...any) { l.t.Fatalf(f, args...) }

// PebbleOptions is Pebble configured as internal/kv runs it (no WAL: the
// raft log is the source of truth), with small memtables and manifests so
// a few thousand keys make many sstables, compactions and manifest
// rotations.
func PebbleOptions(t testing.TB, fs vfs.FS) *pebble.Options {
	opts := &pebble.Options{
		FS:                    fs,
		MemTableSize:          256 << 10,
		DisableWAL:            true,
		FormatMajorVersion:    pebble.FormatNewest,
		L0CompactionThreshold: 2,
		LBaseMaxBytes:         64 << 10,
		MaxManifestFileSize:   1 << 10,
		Logger:                quietLogger{t},
		// Compactions run when the test asks for them: the same writes
		// always leave the same files.
		DisableAutomaticCompactions: true,
		EventListener:               &pebble.EventListener{BackgroundError: func(error) {}, DataCorruption: func(pebble.DataCorruptionInfo) {}},
	}
	opts.TargetFileSizes[0] = 32 << 10
	// 1 KiB blocks with bloom filters: more index entries and filter
	// blocks to protect, and a corrupt block costs Pebble's bit-flip
	// diagnosis (every single-bit flip of the block re-checksummed) a
	// sixteenth of what a 4 KiB block does.
	opts.Levels[0].BlockSize = 1 << 10
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	opts.EnsureDefaults()
	return opts
}

// Dataset is what the store must hold: the value of each key, nil for a
// key written and then deleted.
type Dataset map[string][]byte

// KeyOf is the i-th key of a store BuildStore writes.
func KeyOf(i int) string { return fmt.Sprintf("key%06d", i) }

// ValueOf is 100-150 incompressible bytes determined by the key and the
// version, so the sstables hold real bulk.
func ValueOf(i, version int) []byte {
	r := rand.New(rand.NewSource(int64(i)*10 + int64(version)))
	v := make([]byte, 100+i%51)
	r.Read(v)
	return v
}

// BuildStore writes keys in several flushes, overwrites and deletes some,
// compacts, and closes; it returns what the store holds and how many
// MANIFEST rotations the marker records.
func BuildStore(t testing.TB, fs vfs.FS, dir string, keys int) Dataset {
	t.Helper()
	db, err := pebble.Open(dir, PebbleOptions(t, fs))
	if err != nil {
		t.Fatal(err)
	}
	want := Dataset{}
	put := func(i, version int) {
		k, v := KeyOf(i), ValueOf(i, version)
		if err := db.Set([]byte(k), v, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	for i := 0; i < keys; i++ {
		put(i, 1)
		if i%500 == 499 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Overwrites and deletes in later sstables: losing one of those must
	// never bring an older value back.
	for i := 0; i < keys; i += 7 {
		put(i, 2)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, span := range [][2]int{{0, keys / 2}, {keys / 4, keys * 3 / 4}} {
		if err := db.Compact(context.Background(), []byte(KeyOf(span[0])), []byte(KeyOf(span[1])), false); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < keys; i += 11 {
		k := KeyOf(i)
		if err := db.Delete([]byte(k), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		want[k] = nil
	}
	for i := 1; i < keys; i += 13 {
		put(i, 3)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// Outcome is what reading a store back found.
type Outcome struct {
	Opened  bool
	OpenErr error
	Good    int // keys read back right (present with the right value, or absent when deleted)
	Corrupt int // keys whose read failed as corruption
	ScanErr error
	Bad     []string // wrong values, missing keys, resurrected keys, non-corruption errors
}

func (o Outcome) String() string {
	if !o.Opened {
		return fmt.Sprintf("open failed: %v", o.OpenErr)
	}
	s := fmt.Sprintf("%d good, %d corruption errors", o.Good, o.Corrupt)
	if o.ScanErr != nil {
		s += ", scan: corruption"
	}
	if len(o.Bad) > 0 {
		s += fmt.Sprintf(", %d BAD (first: %s)", len(o.Bad), o.Bad[0])
	}
	return s
}

// ReadBack opens the store and checks every key: each reads back right or
// fails with an error Pebble marks as corruption; a scan returns only
// right pairs and either every live key or a corruption error.
func ReadBack(t testing.TB, fs vfs.FS, dir string, want Dataset) Outcome {
	t.Helper()
	db, err := pebble.Open(dir, PebbleOptions(t, fs))
	if err != nil {
		return Outcome{OpenErr: err}
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	o := Outcome{Opened: true}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, closer, err := db.Get([]byte(k))
		switch {
		case err == nil:
			got := append([]byte(nil), v...)
			closer.Close()
			switch {
			case want[k] == nil:
				o.Bad = append(o.Bad, k+": deleted key came back")
			case !bytes.Equal(got, want[k]):
				o.Bad = append(o.Bad, k+": wrong value")
			default:
				o.Good++
			}
		case errors.Is(err, pebble.ErrNotFound):
			if want[k] != nil {
				o.Bad = append(o.Bad, k+": silently missing")
			} else {
				o.Good++
			}
		case pebble.IsCorruptionError(err):
			o.Corrupt++
		default:
			o.Bad = append(o.Bad, fmt.Sprintf("%s: error not marked as corruption: %v", k, err))
		}
	}
	it, err := db.NewIter(nil)
	if err != nil {
		if !pebble.IsCorruptionError(err) {
			o.Bad = append(o.Bad, fmt.Sprintf("scan: %v", err))
		}
		o.ScanErr = err
		return o
	}
	seen := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := string(it.Key())
		if w, ok := want[k]; !ok || w == nil || !bytes.Equal(w, it.Value()) {
			o.Bad = append(o.Bad, "scan: wrong pair at "+k)
		}
		seen++
	}
	if err := it.Close(); err != nil {
		o.ScanErr = err
		if !pebble.IsCorruptionError(err) {
			o.Bad = append(o.Bad, fmt.Sprintf("scan: %v", err))
		}
	} else {
		live := 0
		for _, v := range want {
			if v != nil {
				live++
			}
		}
		if seen != live {
			o.Bad = append(o.Bad, fmt.Sprintf("scan: %d of %d live keys and no error", seen, live))
		}
	}
	return o
}
