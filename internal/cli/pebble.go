package cli

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/sdf"
	"github.com/flashmend/flashmend/internal/sdfvfs"
)

// newPebbleCmd is `flashmend pebble load|check`: Pebble on the SDF layer of a
// file-backed emulated device (internal/sdfvfs), made with `flash format`.
func newPebbleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pebble",
		Short: "Run Pebble on an emulated flash device through the SDF layer (internal/sdfvfs)",
		Long: `pebble loads keys into a Pebble store on a device made with "flash format",
through internal/sdfvfs (MANIFEST/OPTIONS shadow copies on other channels,
optional copies of every sstable's metadata), and checks them back: with UBER
injected ("flash inject --uber"), reads fail as corruption, never as wrong data.`,
	}
	cmd.AddCommand(newPebbleLoadCmd(), newPebbleCheckCmd())
	return cmd
}

type pebbleFlags struct {
	dir, db         string
	keys, valueSize int
	metadataCopies  bool
	quiet           bool
}

func (f *pebbleFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "device directory (from flash format)")
	fl.StringVar(&f.db, "db", "db", "Pebble directory on the device")
	fl.IntVar(&f.keys, "keys", 100_000, "number of keys")
	fl.IntVar(&f.valueSize, "value-bytes", 100, "value size in bytes")
	fl.BoolVar(&f.metadataCopies, "sst-metadata-copies", false, "keep a copy of every sstable's index, filter, properties and footer (DIRECT policy 2)")
	registerQuiet(cmd, &f.quiet)
}

func (f *pebbleFlags) validate() error {
	switch {
	case f.dir == "":
		return usageError{errors.New("--dir is required")}
	case f.keys < 1 || f.keys > 100_000_000:
		return base.InvalidArgumentf("--keys %d not in [1, 1e8]", f.keys)
	case f.valueSize < 16 || f.valueSize > 1<<20:
		return base.InvalidArgumentf("--value-bytes %d not in [16, 1MiB]", f.valueSize)
	}
	return nil
}

// pebbleKey and pebbleValue are the deterministic workload: check recomputes
// every value, so a wrong byte is told from a missing key.
func pebbleKey(i int) []byte { return []byte(fmt.Sprintf("key%012d", i)) }

func pebbleValue(i, size int) []byte {
	v := make([]byte, size)
	seed := crc32.ChecksumIEEE(pebbleKey(i))
	for j := range v {
		seed = seed*1664525 + 1013904223
		v[j] = 'a' + byte(seed>>24)%26
	}
	return v
}

// pebbleStore is Pebble on sdfvfs on a device directory.
type pebbleStore struct {
	dev         *flash.Emulator
	sfs         *sdf.FS
	fs          *sdfvfs.FS
	db          *pebble.DB
	corruptions atomic.Int64 // Pebble DataCorruption events
}

func openPebbleStore(f *pebbleFlags, stderr io.Writer) (*pebbleStore, error) {
	dev, _, err := openDevice(f.dir, flash.TimingNone, true)
	if err != nil {
		return nil, err
	}
	s := &pebbleStore{dev: dev}
	if s.sfs, err = sdf.Open(dev, sdf.Options{}); err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	var opts sdfvfs.Options
	if f.metadataCopies {
		opts.MetadataRanges = sdfvfs.SSTMetadataRanges(sstable.ReaderOptions{})
	}
	if s.fs, err = sdfvfs.New(s.sfs, opts); err == nil {
		po := &pebble.Options{FS: s.fs, Logger: pebbleLogger{stderr}}
		po.EventListener = &pebble.EventListener{
			DataCorruption: func(pebble.DataCorruptionInfo) { s.corruptions.Add(1) },
		}
		s.db, err = pebble.Open(f.db, po)
	}
	if err != nil {
		return nil, errors.Join(err, s.sfs.Close(), dev.Close())
	}
	return s, nil
}

func (s *pebbleStore) close() error {
	return errors.Join(s.db.Close(), s.sfs.Close(), s.dev.Close())
}

// pebbleLogger drops Pebble's informational logs and keeps its errors.
type pebbleLogger struct{ w io.Writer }

func (pebbleLogger) Infof(string, ...any)        {}
func (l pebbleLogger) Errorf(f string, a ...any) { fmt.Fprintf(l.w, "pebble: "+f+"\n", a...) }
func (l pebbleLogger) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf("pebble: fatal: "+f, a...))
}

func newPebbleLoadCmd() *cobra.Command {
	var f pebbleFlags
	var batch int
	var syncEach bool
	cmd := &cobra.Command{
		Use:   "load --dir DIR",
		Short: "Write keys into Pebble on the device and report write amplification",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if batch < 1 || batch > 1_000_000 {
				return base.InvalidArgumentf("--batch %d not in [1, 1e6]", batch)
			}
			s, err := openPebbleStore(&f, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			before := s.sfs.Stats()
			start := time.Now()
			wo := pebble.NoSync
			if syncEach {
				wo = pebble.Sync
			}
			var appBytes int64
			p := cmdProgress(cmd, f.quiet)
			for lo := 0; lo < f.keys && err == nil; lo += batch {
				p.Tickf("pebble load: %d of %d keys", lo, f.keys)
				b := s.db.NewBatch()
				for i := lo; i < min(lo+batch, f.keys); i++ {
					k, v := pebbleKey(i), pebbleValue(i, f.valueSize)
					appBytes += int64(len(k) + len(v))
					if err = b.Set(k, v, nil); err != nil {
						break
					}
				}
				if err == nil {
					err = b.Commit(wo)
				}
			}
			if err == nil {
				err = s.db.Flush()
			}
			elapsed := time.Since(start)
			vst := s.fs.Stats()
			if cerr := s.db.Close(); err == nil {
				err = cerr
			}
			st := s.sfs.Stats()
			err = errors.Join(err, s.sfs.Close(), s.dev.Close())
			if err != nil {
				return err
			}
			user, flashBytes := st.UserBytes-before.UserBytes, st.FlashBytes-before.FlashBytes
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "loaded %d keys (%s of keys and values) into %s in %v\n", f.keys, base.Bytes(appBytes), f.db, elapsed.Round(time.Millisecond))
			fmt.Fprintf(w, "write amplification: sdf %.3f (flash/Pebble bytes), Pebble %.3f (Pebble/application bytes), total %.3f\n",
				float64(flashBytes)/float64(max(user, 1)), float64(user)/float64(appBytes), float64(flashBytes)/float64(appBytes))
			fmt.Fprintf(w, "copies: %s\n%s", vst, st)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&batch, "batch", 1000, "keys per batch")
	cmd.Flags().BoolVar(&syncEach, "sync", false, "sync every batch")
	return cmd
}

func newPebbleCheckCmd() *cobra.Command {
	var f pebbleFlags
	cmd := &cobra.Command{
		Use:   "check --dir DIR",
		Short: "Read every key back: counts correct values, corruption errors, missing keys and wrong values",
		Long: `check reads keys 0..--keys-1 with Get. A read that fails verification is a
corruption error (counted); a wrong value would be a bug and fails the command,
as does a missing key.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			s, err := openPebbleStore(&f, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var ok, corrupt, missing, wrong int
			p := cmdProgress(cmd, f.quiet)
			for i := 0; i < f.keys; i++ {
				if i%1024 == 0 {
					p.Tickf("pebble check: %d of %d keys, %d corruption errors", i, f.keys, corrupt)
				}
				v, closer, gerr := s.db.Get(pebbleKey(i))
				switch {
				case errors.Is(gerr, pebble.ErrNotFound):
					missing++
				case pebble.IsCorruptionError(gerr):
					corrupt++
				case gerr != nil:
					err = gerr
				case bytes.Equal(v, pebbleValue(i, f.valueSize)):
					ok++
				default:
					wrong++
				}
				if closer != nil {
					closer.Close()
				}
				if err != nil {
					break
				}
			}
			vst := s.fs.Stats()
			events := s.corruptions.Load()
			err = errors.Join(err, s.close())
			fmt.Fprintf(cmd.OutOrStdout(), "keys %d: correct %d, corruption errors %d, missing %d, wrong %d; DataCorruption events %d\ncopies: %s\n",
				f.keys, ok, corrupt, missing, wrong, events, vst)
			if err != nil {
				return err
			}
			if wrong > 0 || missing > 0 {
				return fmt.Errorf("%d wrong values, %d missing keys", wrong, missing)
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
