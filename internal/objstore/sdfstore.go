package objstore

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
	"github.com/flashmend/flashmend/internal/flash/pagefile"
	"github.com/flashmend/flashmend/internal/fsys"
	"github.com/flashmend/flashmend/internal/sdf"
)

// SDFStoreOptions configures an SDFStore.
type SDFStoreOptions struct {
	// Geometry of a new device (default DevGeometry). An existing device
	// keeps the geometry it was created with.
	Geometry flash.Geometry
	// Preset names the flash preset for wear and error parameters (default
	// "small"); timing is off (operations run as fast as the backend).
	Preset string
	Seed   int64
	// OnDevice, if set, is called with the device once it opens, before
	// SDF mounts (or formats) it: fault injectors arm its Faults there, so
	// that the mount's own reads and writes meet them too.
	OnDevice func(*flash.Emulator)
	// DeviceStateIO, if set, is what the device reads and writes its state
	// copies through (flash.Options.StateIO; nil: the os): a fault
	// injector's hook.
	DeviceStateIO pagefile.StateIO
	// PowerUnsafe turns off flash.Options.PowerSafe, which is on by
	// default: the device's page file is then not fsynced when SDF syncs,
	// so a process crash loses nothing acknowledged but a power loss of
	// the host can (a synced chunk, or the SDF metadata that maps it).
	// UNSAFE: for measurements of what the fsyncs cost, never for a store
	// that keeps data (`--unsafe-no-device-sync`).
	PowerUnsafe bool
	// FS, if set, is the file system dir is on: the device's page file and
	// state copies and the format markers (nil: the os's). An fsys.Mem
	// cuts the store's power in internal/torture/powerloss.
	FS fsys.FS
	// Serial runs the device's operations one after another (sdf.Options.
	// Serial): a store used from one goroutine then makes the same
	// sequence of file-system operations on every run, so power-loss
	// trials cut at the n-th one repeat. Slower; for tests.
	Serial bool
}

// DevGeometry is the emulated device of a `flashmend dev` node: 8 channels x
// 2 dies x 64 blocks x 64 pages of 4 KiB (256 MiB of data pages).
func DevGeometry() flash.Geometry {
	return flash.Geometry{Channels: 8, DiesPerChannel: 2, BlocksPerDie: 64, PagesPerBlock: 64, PageSize: 4096, OOBSize: 128}
}

// SDFStore is a Store on SDF extent files (internal/sdf) over a file-backed
// emulated flash device: the node's chunks live on emulated flash, with its
// zones, host GC, page checksums and die failures. Get returns a damaged
// file's content as the device read it (sdf.ReadRaw) so that majority votes
// work; the object layer's checksums decide what is corrupt.
type SDFStore struct {
	dir  string
	dev  *flash.Emulator
	fs   *sdf.FS
	seq  atomic.Uint64
	mu   sync.Mutex // serializes FlipBits with writers of the same name
	info SDFOpenInfo
	// dies receives the flash layer's die-failure events (DieEvents).
	dies chan sdf.DieFailure
}

var _ Store = (*SDFStore)(nil)
var _ DieFailer = (*SDFStore)(nil)
var _ RangeWriter = (*SDFStore)(nil)
var _ WearReporter = (*SDFStore)(nil)

const sdfFormattedMarker = "sdf-formatted"

// sdfFormattingMarker is the format intent: written durably before a blank
// device is formatted and removed once sdfFormattedMarker is durable. A
// device that holds state but neither a formatted marker nor a file system
// that mounts is refused, never erased, unless this marker says the state
// is a format of ours that a crash cut short: then the format is run
// again (nothing can have been stored on a device that was never
// formatted).
const sdfFormattingMarker = "sdf-formatting"

// OpenSDFStore opens the emulated device in dir. It formats only a blank
// device: one with no state files and no programmed page (a new or emptied
// directory). A device with any state is never formatted implicitly: with
// its format marker it is mounted; without the marker it is mounted if its
// SDF metadata is there (the marker is rewritten, SDFStore.OpenInfo says
// so), and otherwise refused with an error naming the directory.
func OpenSDFStore(dir string, opts SDFStoreOptions) (*SDFStore, error) {
	if dir == "" {
		return nil, base.InvalidArgumentf("sdfstore: empty directory")
	}
	if opts.Geometry == (flash.Geometry{}) {
		opts.Geometry = DevGeometry()
	}
	if opts.Preset == "" {
		opts.Preset = "small"
	}
	p, err := catalog.Lookup(opts.Preset)
	if err != nil {
		return nil, err
	}
	devDir := filepath.Join(dir, "flash")
	files := opts.FS
	if files == nil {
		files = fsys.OS{}
	}
	marker := filepath.Join(dir, sdfFormattedMarker)
	intent := filepath.Join(dir, sdfFormattingMarker)
	blank, err := deviceBlank(files, devDir)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	if err := fsys.MkdirAllDurable(files, devDir, 0o755, nil); err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	if blank {
		// The format intent goes first, before the device's files: a
		// crash while the new device writes its first state, or before
		// format, leaves a device with state and no file system, which is
		// formatted again only with the intent (found by torture
		// powerloss --store sdf; TestSDFStoreFirstOpenCutAtEveryOperation).
		if _, err := files.Stat(marker); errors.Is(err, iofs.ErrNotExist) {
			if err := writeMarker(files, intent, "formatting\n"); err != nil {
				return nil, fmt.Errorf("sdfstore: format intent marker: %w", err)
			}
		}
	}
	fopts := p.Options(flash.TimingNone, nil, opts.Seed)
	fopts.StateIO = opts.DeviceStateIO
	// Nothing acknowledged is lost, a host power loss included: SDF's
	// syncs reach the page file's disk (internal/sdf doc, "Power loss").
	fopts.PowerSafe = !opts.PowerUnsafe
	fopts.FS = opts.FS
	dev, err := flash.OpenFile(devDir, opts.Geometry, fopts)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: device: %w", err)
	}
	if opts.OnDevice != nil {
		opts.OnDevice(dev)
	}
	info := SDFOpenInfo{Device: dev.OpenInfo(), PowerSafe: fopts.PowerSafe}
	dies := make(chan sdf.DieFailure, 64)
	fsOpts := sdf.Options{OnDieFailure: func(f sdf.DieFailure) {
		select {
		case dies <- f:
		default: // nobody listens; FailedDies still lists it
		}
	}, Serial: opts.Serial}
	_, statErr := files.Stat(marker)
	var fs *sdf.FS
	switch {
	case statErr == nil:
		fs, err = sdf.Open(dev, fsOpts)
		if err != nil {
			err = fmt.Errorf("sdfstore: mount %s: %w", devDir, err)
		} else {
			// A crash between the two markers' writes leaves the intent
			// behind; the format finished, so it goes.
			err = removeIntent(files, dir, intent)
		}
	case !errors.Is(statErr, iofs.ErrNotExist):
		err = fmt.Errorf("sdfstore: format marker: %w", statErr)
	case info.Device.New:
		fs, err = format(files, dev, fsOpts, dir, devDir, marker, intent)
		info.Formatted = true
	default:
		// State but no marker: the marker was lost, or a format never
		// finished. Mount what is there; never erase it, unless the
		// format intent says a format of a blank device was cut short.
		fs, err = sdf.Open(dev, fsOpts)
		_, intentErr := files.Stat(intent)
		switch {
		case err != nil && intentErr == nil:
			fs, err = format(files, dev, fsOpts, dir, devDir, marker, intent)
			info.Formatted, info.FormatResumed = true, true
		case err != nil:
			err = fmt.Errorf("sdfstore: %s holds an emulated flash device (%s) but no format marker (%s) and no SDF file system that mounts: %w; "+
				"refusing to format it implicitly: to erase it, remove %s and start again", dir, dev.OpenInfo(), sdfFormattedMarker, err, dir)
		default:
			if err = writeMarker(files, marker, "formatted\n"); err != nil {
				err = fmt.Errorf("sdfstore: format marker: %w", err)
			} else {
				err = removeIntent(files, dir, intent)
			}
			info.MarkerRestored = true
		}
	}
	if err != nil {
		if fs != nil {
			fs.Close()
		}
		dev.Close()
		return nil, err
	}
	info.FS = fs.OpenInfo()
	return &SDFStore{dir: dir, dev: dev, fs: fs, info: info, dies: dies}, nil
}

// SDFOpenInfo says how an SDFStore was opened.
type SDFOpenInfo struct {
	Device flash.OpenInfo
	// FS says how the SDF metadata journal was assembled.
	FS sdf.OpenInfo
	// Formatted: the device was blank and was formatted.
	Formatted bool
	// MarkerRestored: the format marker was missing, the file system
	// mounted, and the marker was written again.
	MarkerRestored bool
	// FormatResumed: a format of the blank device was cut short (its
	// intent marker was there, no file system mounted) and was run again.
	FormatResumed bool
	// PowerSafe: the device fsyncs its page file when SDF syncs
	// (SDFStoreOptions.PowerUnsafe not set).
	PowerSafe bool
}

func (i SDFOpenInfo) String() string {
	s := "device " + i.Device.String() + "; sdf " + i.FS.String()
	if i.Formatted {
		s += ", formatted"
	}
	if i.MarkerRestored {
		s += ", format marker restored"
	}
	if i.FormatResumed {
		s += " (an interrupted format run again)"
	}
	if !i.PowerSafe {
		s += "; UNSAFE: device not fsynced at syncs, a power loss can lose acknowledged writes"
	}
	return s
}

// OpenInfo says how the store was opened.
func (s *SDFStore) OpenInfo() SDFOpenInfo { return s.info }

// format formats the device after the format intent is durable, then
// writes the formatted marker and removes the intent.
func format(files fsys.FS, dev *flash.Emulator, opts sdf.Options, dir, devDir, marker, intent string) (*sdf.FS, error) {
	if err := writeMarker(files, intent, "formatting\n"); err != nil {
		return nil, fmt.Errorf("sdfstore: format intent marker: %w", err)
	}
	fs, err := sdf.Format(dev, opts)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: format %s: %w", devDir, err)
	}
	if err := writeMarker(files, marker, "formatted\n"); err != nil {
		return fs, fmt.Errorf("sdfstore: format marker: %w", err)
	}
	return fs, removeIntent(files, dir, intent)
}

// deviceBlank reports whether the device directory holds no device yet:
// it does not exist, or holds nothing but the lock a device open takes.
func deviceBlank(files fsys.FS, devDir string) (bool, error) {
	ents, err := files.ReadDir(devDir)
	if errors.Is(err, iofs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if e.Name() != "LOCK" {
			return false, nil
		}
	}
	return true, nil
}

// removeIntent removes the format intent marker, if any, durably.
func removeIntent(files fsys.FS, dir, intent string) error {
	if err := files.Remove(intent); err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sdfstore: format intent marker: %w", err)
	}
	return files.SyncDir(dir)
}

// writeMarker writes marker with content durably: a temporary file
// written and synced, renamed over marker, the directory synced.
func writeMarker(files fsys.FS, marker, content string) error {
	if _, ok := files.(fsys.OS); ok {
		return base.WriteFileDurable(marker, []byte(content), 0o644)
	}
	tmp := marker + ".tmp"
	f, err := files.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(content))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = files.Rename(tmp, marker)
	}
	if err != nil {
		return err
	}
	return files.SyncDir(filepath.Dir(marker))
}

// Name implements Store.
func (s *SDFStore) Name() string { return "sdf:" + s.dir }

// FS returns the SDF layer (for statistics and die repair).
func (s *SDFStore) FS() *sdf.FS { return s.fs }

// Put implements Store: a new extent file, synced, renamed over the old one.
func (s *SDFStore) Put(name string, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	return s.put(name, data, -1)
}

var _ CopyPlacer = (*SDFStore)(nil)

// PutCopy implements CopyPlacer: copy i of group goes to channel
// (h + i) mod channels, h a hash of the group's name, so a group's copies
// are on as many different channels as the device has (channels share no
// die) and the groups spread over all channels; a channel with no zone to
// give yields to another (sdf.FS.CreatePreferring). NB: the preference is
// not persisted (sdf's CreateOn): GC after a reopen may move a copy onto
// another copy's channel, and the next rewrite places it apart again.
func (s *SDFStore) PutCopy(name string, data []byte, group string, i int) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if i < 0 {
		return base.InvalidArgumentf("sdfstore: copy %d of %s", i, group)
	}
	n := s.dev.Geometry().Channels
	return s.put(name, data, int((uint64(base.CRC32C([]byte(group)))+uint64(i))%uint64(n)))
}

// put writes name through a temporary file renamed over it, preferably on
// channel ch (-1: wherever the layer places it).
func (s *SDFStore) put(name string, data []byte, ch int) error {
	tmp := fmt.Sprintf("%s.tmp%d", name, s.seq.Add(1))
	var f *sdf.File
	var err error
	if ch >= 0 {
		f, err = s.fs.CreatePreferring(tmp, sdf.LifetimeNone, ch)
	} else {
		f, err = s.fs.Create(tmp, sdf.LifetimeNone)
	}
	if err != nil {
		return fmt.Errorf("sdfstore: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		s.mu.Lock()
		err = s.fs.Rename(tmp, name)
		s.mu.Unlock()
	}
	if err != nil {
		if rerr := s.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", tmp, rerr))
		}
		return fmt.Errorf("sdfstore: put %s: %w", name, err)
	}
	return nil
}

// Get implements Store.
func (s *SDFStore) Get(name string) ([]byte, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	st, err := s.fs.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	f, err := s.fs.OpenFile(name)
	if err != nil {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	defer f.Close()
	buf := make([]byte, st.Size)
	n, err := f.ReadAt(buf, 0)
	if err == nil || (n == len(buf) && !base.IsCorruption(err)) {
		return buf, nil
	}
	if !base.IsCorruption(err) {
		return nil, fmt.Errorf("sdfstore: %w", err)
	}
	raw, _, rerr := s.fs.ReadRaw(name, 0, st.Size)
	if rerr != nil {
		return nil, fmt.Errorf("sdfstore: raw read of %s after %v: %w", name, err, rerr)
	}
	return raw, nil
}

// Delete implements Store.
func (s *SDFStore) Delete(name string) error {
	if err := s.fs.Remove(name); err != nil && !errors.Is(err, sdf.ErrNotExist) {
		return fmt.Errorf("sdfstore: %w", err)
	}
	return nil
}

// List implements Store.
func (s *SDFStore) List(prefix string) ([]string, error) {
	var out []string
	for _, n := range s.fs.List() {
		if strings.HasPrefix(n, prefix) && !strings.Contains(n[strings.LastIndex(n, "/")+1:], ".tmp") {
			out = append(out, n)
		}
	}
	return out, nil
}

// FlipBits implements Store: the damaged content is rewritten on flash (out
// of place, as the SDF layer always writes), so the device's own page
// checksums pass and only the object layer's checksums can catch it.
func (s *SDFStore) FlipBits(name string, bitOffset int64, count int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.Get(name)
	if err != nil {
		return err
	}
	if err := InvertBits(b, bitOffset, count); err != nil {
		return err
	}
	return s.fs.RewriteRange(name, 0, b)
}

// WriteAt implements RangeWriter with sdf RewriteRange: the pages the range
// touches are programmed out of place and remapped. A range outside the file,
// or one whose partly covered pages do not verify on the device, returns
// ErrRangeUnsupported (the caller rewrites the whole file).
func (s *SDFStore) WriteAt(name string, off int64, data []byte) error {
	if err := ValidName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.fs.Stat(name)
	if err != nil {
		if errors.Is(err, sdf.ErrNotExist) {
			return fmt.Errorf("sdfstore: %s: %w (%w)", name, ErrRangeUnsupported, ErrNotFound)
		}
		return fmt.Errorf("sdfstore: %w", err)
	}
	if off < 0 || off+int64(len(data)) > st.Size {
		return fmt.Errorf("sdfstore: %s [%d,%d) of %d bytes: %w", name, off, off+int64(len(data)), st.Size, ErrRangeUnsupported)
	}
	if err := s.fs.RewriteRange(name, off, data); err != nil {
		if base.IsCorruption(err) {
			return fmt.Errorf("sdfstore: %s: %v: %w", name, err, ErrRangeUnsupported)
		}
		return fmt.Errorf("sdfstore: %w", err)
	}
	return nil
}

// Usage implements Store.
func (s *SDFStore) Usage() (Usage, error) {
	st := s.fs.Stats()
	return Usage{CapacityBytes: st.Usable, UsedBytes: st.Live}, nil
}

// Wear implements WearReporter from the device's per-block erase counts.
func (s *SDFStore) Wear() Wear {
	var w Wear
	perDie := s.dev.Geometry().BlocksPerDie
	for i, n := range s.dev.EraseCounts() {
		if perDie > 0 {
			if die := i / perDie; die >= len(w.DieErases) {
				w.DieErases = append(w.DieErases, 0)
			}
			w.DieErases[i/perDie] += int64(n)
		}
		w.Blocks++
		w.EraseCountTotal += int64(n)
		w.EraseCountMax = max(w.EraseCountMax, int64(n))
	}
	return w
}

// FailDie implements DieFailer: die is the flat, channel-major index.
func (s *SDFStore) FailDie(die int) error {
	g := s.dev.Geometry()
	if die < 0 || die >= g.Dies() {
		return base.InvalidArgumentf("die %d outside [0, %d)", die, g.Dies())
	}
	addr := flash.DieAddr{Channel: die / g.DiesPerChannel, Die: die % g.DiesPerChannel}
	if slices.Contains(s.fs.FailedDies(), addr) {
		return base.InvalidArgumentf("die %d (%s) has already failed", die, addr)
	}
	if err := s.dev.FailDie(addr); err != nil {
		return err
	}
	return s.fs.MarkDieFailed(addr)
}

// Close implements Store.
func (s *SDFStore) Close() error {
	err := s.fs.Close()
	if derr := s.dev.Close(); err == nil {
		err = derr
	}
	return err
}
