package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
	"github.com/flashmend/flashmend/internal/flash/catalog"
	"github.com/flashmend/flashmend/internal/sdf"
)

// addFlashDeviceCmds attaches `flash format|info|bench|inject`, the SDF host
// layer (internal/sdf) on a file-backed emulated device, to the `flash`
// command.
func addFlashDeviceCmds(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() == "flash" {
			c.AddCommand(newFlashFormatCmd(), newFlashInfoCmd(), newFlashBenchCmd(), newFlashInjectCmd())
			return
		}
	}
}

// deviceConfigFile, in the device directory, records how to reopen the
// device: the preset (timing, wear), the geometry, the seed, and the injected
// error rate. Die failures live in the device's own persisted state.
const deviceConfigFile = "device.json"

type deviceConfig struct {
	Preset         string         `json:"preset"`
	Geometry       flash.Geometry `json:"geometry"`
	Seed           int64          `json:"seed"`
	UBER           float64        `json:"uber"`
	UBERPersistent bool           `json:"uber_persistent"`
}

func loadDeviceConfig(dir string) (deviceConfig, error) {
	var cfg deviceConfig
	b, err := os.ReadFile(filepath.Join(dir, deviceConfigFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return cfg, base.InvalidArgumentf("no flash device in %s (run flashmend flash format --dir %s)", dir, dir)
		}
		return cfg, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, fmt.Errorf("%s: %w", filepath.Join(dir, deviceConfigFile), err)
	}
	return cfg, nil
}

func saveDeviceConfig(dir string, cfg deviceConfig) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, deviceConfigFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, deviceConfigFile))
}

// openDevice opens the file-backed device in dir with the preset's timing
// in the given mode and, if withErrors, the injected UBER model.
func openDevice(dir string, mode flash.TimingMode, withErrors bool) (*flash.Emulator, deviceConfig, error) {
	cfg, err := loadDeviceConfig(dir)
	if err != nil {
		return nil, cfg, err
	}
	p, err := catalog.Lookup(cfg.Preset)
	if err != nil {
		return nil, cfg, err
	}
	var m flash.ErrorModel
	if withErrors && cfg.UBER > 0 {
		m = flash.UBERModel{UBER: cfg.UBER, Persistent: cfg.UBERPersistent}
	}
	dev, err := flash.OpenFile(dir, cfg.Geometry, p.Options(mode, m, cfg.Seed))
	return dev, cfg, err
}

func newFlashFormatCmd() *cobra.Command {
	var (
		dir, preset                  string
		channels, dies, blocks, page int
		pageSize, oob                int
		seed                         int64
		force                        bool
	)
	cmd := &cobra.Command{
		Use:   "format --dir DIR",
		Short: "Create a file-backed flash device in DIR and format the SDF layer on it",
		Long: `format creates an emulated NAND device backed by files in DIR (geometry from
--preset, each dimension overridable) and writes an empty SDF file system on it
(internal/sdf: zones, extent files, duplicated metadata journal).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			p, err := catalog.Lookup(preset)
			if err != nil {
				return err
			}
			g := p.Geometry
			for _, o := range []struct {
				v   int
				dst *int
			}{{channels, &g.Channels}, {dies, &g.DiesPerChannel}, {blocks, &g.BlocksPerDie},
				{page, &g.PagesPerBlock}, {pageSize, &g.PageSize}, {oob, &g.OOBSize}} {
				if o.v != 0 {
					*o.dst = o.v
				}
			}
			if err := g.Validate(); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(dir, deviceConfigFile)); err == nil {
				if !force {
					return base.InvalidArgumentf("%s already holds a device (use --force to replace it)", dir)
				}
				for _, f := range []string{"pages", "state.0", "state.1", "state.2", deviceConfigFile} {
					if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := saveDeviceConfig(dir, deviceConfig{Preset: p.Name, Geometry: g, Seed: seed}); err != nil {
				return err
			}
			dev, _, err := openDevice(dir, flash.TimingNone, false)
			if err != nil {
				return err
			}
			fs, err := sdf.Format(dev, sdf.Options{})
			if err != nil {
				dev.Close()
				return err
			}
			st := fs.Stats()
			err = errors.Join(fs.Close(), dev.Close())
			fmt.Fprintf(cmd.OutOrStdout(), "formatted %s: preset %s, %s\n%s", dir, p.Name, g, capacityLine(st))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "device directory")
	f.StringVar(&preset, "preset", "sdf", "device preset: "+strings.Join(catalog.Names(), ", "))
	f.IntVar(&channels, "channels", 0, "channels (0: the preset's)")
	f.IntVar(&dies, "dies", 0, "dies per channel (0: the preset's)")
	f.IntVar(&blocks, "blocks", 0, "blocks per die (0: the preset's)")
	f.IntVar(&page, "pages", 0, "pages per block (0: the preset's)")
	f.IntVar(&pageSize, "page-size", 0, "page data bytes (0: the preset's)")
	f.IntVar(&oob, "oob", 0, "page spare bytes (0: the preset's)")
	f.Int64Var(&seed, "seed", 1, "device random seed")
	f.BoolVar(&force, "force", false, "replace an existing device in DIR")
	return cmd
}

// capacityLine reports usable capacity as a fraction of raw, and of raw
// without bad blocks and the metadata zones.
func capacityLine(st sdf.Stats) string {
	net := st.Raw - st.BadBytes - st.MetaReserved
	return fmt.Sprintf("capacity: raw %s, usable %s = %.2f%% of raw (%.2f%% of raw excluding bad blocks %s and metadata zones %s)\n",
		st.Raw, st.Usable, 100*st.UsableFraction(), 100*float64(st.Usable)/float64(net), st.BadBytes, st.MetaReserved)
}

func newFlashInfoCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "info --dir DIR",
		Short: "Show a device's geometry, usable capacity, wear, bad blocks, failed dies and files",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			dev, cfg, err := openDevice(dir, flash.TimingNone, false)
			if err != nil {
				return err
			}
			defer dev.Close()
			// Read-only: inspecting a device must not wear it (an Open
			// otherwise writes a fresh metadata checkpoint).
			fs, err := sdf.Open(dev, sdf.Options{ReadOnly: true})
			if err != nil {
				return err
			}
			defer fs.Close()
			return writeInfo(cmd.OutOrStdout(), dev, cfg, fs)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "device directory")
	return cmd
}

func writeInfo(w io.Writer, dev *flash.Emulator, cfg deviceConfig, fs *sdf.FS) error {
	g := cfg.Geometry
	st := fs.Stats()
	fmt.Fprintf(w, "device: preset %s, geometry %s, seed %d\n", cfg.Preset, g, cfg.Seed)
	if cfg.UBER > 0 {
		fmt.Fprintf(w, "injected UBER: %g (persistent %t)\n", cfg.UBER, cfg.UBERPersistent)
	}
	fmt.Fprint(w, capacityLine(st))
	var erases []int
	var bad []string
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			for b := 0; b < g.BlocksPerDie; b++ {
				a := flash.BlockAddr{Channel: c, Die: d, Block: b}
				info, err := dev.Block(a)
				if err != nil {
					return err
				}
				erases = append(erases, info.EraseCount)
				if info.Bad {
					bad = append(bad, a.String())
				}
			}
		}
	}
	fmt.Fprintln(w, "wear (P/E cycles per block):")
	for _, line := range histogram(erases, 8) {
		fmt.Fprintln(w, "  "+line)
	}
	fmt.Fprintf(w, "bad blocks: %d", len(bad))
	if len(bad) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(bad[:min(len(bad), 16)], " "))
	}
	fmt.Fprintln(w)
	var failed []string
	for c := 0; c < g.Channels; c++ {
		for d := 0; d < g.DiesPerChannel; d++ {
			a := flash.DieAddr{Channel: c, Die: d}
			if f, err := dev.DieFailed(a); err == nil && f {
				failed = append(failed, a.String())
			}
		}
	}
	fmt.Fprintf(w, "failed dies: %d %s\n", len(failed), strings.Join(failed, " "))
	fmt.Fprintf(w, "files: %d, live %s, used %s\n", st.Files, st.Live, st.Used)
	fmt.Fprint(w, "zones:")
	for s := sdf.ZoneEmpty; s <= sdf.ZoneOffline; s++ {
		fmt.Fprintf(w, " %s=%d", s, st.Zones[s])
	}
	fmt.Fprintln(w)
	return nil
}

// histogram buckets values into at most n equal-width ranges.
func histogram(v []int, n int) []string {
	if len(v) == 0 {
		return nil
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	width := max(1, (hi-lo+n)/n)
	counts := map[int]int{}
	for _, x := range v {
		counts[(x-lo)/width]++
	}
	var keys []int
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var out []string
	for _, k := range keys {
		a := lo + k*width
		out = append(out, fmt.Sprintf("%6d..%-6d %8d blocks", a, a+width-1, counts[k]))
	}
	return out
}

func newFlashInjectCmd() *cobra.Command {
	var (
		dir, failDie string
		uber         float64
		persistent   bool
	)
	cmd := &cobra.Command{
		Use:   "inject --dir DIR [--uber RATE] [--fail-die CH/DIE]",
		Short: "Set the device's UBER (DIRECT's error injection) or fail a die (persisted)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageError{errors.New("--dir is required")}
			}
			cfg, err := loadDeviceConfig(dir)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("uber") && failDie == "" {
				return usageError{errors.New("nothing to inject: give --uber or --fail-die")}
			}
			if cmd.Flags().Changed("uber") {
				if !(uber >= 0 && uber < 1) {
					return base.InvalidArgumentf("--uber %g outside [0, 1)", uber)
				}
				cfg.UBER, cfg.UBERPersistent = uber, persistent
				if err := saveDeviceConfig(dir, cfg); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "UBER set to %g (persistent %t)\n", uber, persistent)
			}
			if failDie != "" {
				a, err := parseDie(failDie)
				if err != nil {
					return err
				}
				dev, _, err := openDevice(dir, flash.TimingNone, false)
				if err != nil {
					return err
				}
				err = dev.FailDie(a)
				err = errors.Join(err, dev.Close())
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "die %s failed\n", a)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "device directory")
	f.Float64Var(&uber, "uber", 0, "uncorrectable bit error rate of every read (0 clears)")
	f.BoolVar(&persistent, "persistent", false, "with --uber: flips are written back into the cells")
	f.StringVar(&failDie, "fail-die", "", "fail die CHANNEL/DIE, e.g. 0/1")
	return cmd
}

func parseDie(s string) (flash.DieAddr, error) {
	a, b, ok := strings.Cut(s, "/")
	c, err1 := strconv.Atoi(strings.TrimPrefix(a, "ch"))
	d, err2 := strconv.Atoi(strings.TrimPrefix(b, "d"))
	if !ok || err1 != nil || err2 != nil {
		return flash.DieAddr{}, base.InvalidArgumentf("bad die %q (want CHANNEL/DIE, e.g. 0/1)", s)
	}
	return flash.DieAddr{Channel: c, Die: d}, nil
}

func parseInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, base.InvalidArgumentf("bad number %q in %q", f, s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseFloats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, base.InvalidArgumentf("bad number %q in %q", f, s)
		}
		out = append(out, v)
	}
	return out, nil
}
