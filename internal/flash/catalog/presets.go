package catalog

import (
	"fmt"
	"sort"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/flash"
)

// Preset is a named device configuration: geometry, timing, wear and the
// physical error model's parameters. Use Options to turn it into device
// options.
type Preset struct {
	Name     string
	Geometry flash.Geometry
	Timing   flash.Timing // Mode is left TimingNone; pick one with Options
	Wear     flash.WearOptions
	// Fit and the ECC below parameterize PhysicalModel.
	Fit             flash.RBERFit
	CodewordBytes   int
	CorrectableBits int
	PageSigma       float64
	Notes           string
}

func (p Preset) String() string {
	return fmt.Sprintf("%s: %s, %s, %s", p.Name, p.Geometry, p.Timing, p.Wear)
}

// PhysicalModel is the preset's physical error model.
func (p Preset) PhysicalModel(seed int64) flash.PhysicalModel {
	return flash.PhysicalModel{Fit: p.Fit, CodewordBytes: p.CodewordBytes, CorrectableBits: p.CorrectableBits,
		PageSigma: p.PageSigma, Seed: seed}
}

// Options returns device options for the preset with the given timing mode,
// error model (nil: none) and seed, and the preset's wear model.
func (p Preset) Options(mode flash.TimingMode, model flash.ErrorModel, seed int64) flash.Options {
	t := p.Timing
	t.Mode = mode
	return flash.Options{Seed: seed, ErrorModel: model, Wear: p.Wear, Timing: t}
}

// withMLC25nm gives p the wear and error parameters of 25 nm MLC, the flash
// of SDF 002 and of the small test device: rated 3,000 P/E (the class of
// DIRECT 000 Figure 1); BCH correcting 40 bits per 1 KiB codeword (25 nm
// MLC parts ask for 24 bits per 1080 bytes; controllers add margin).
func withMLC25nm(p Preset) Preset {
	p.Wear = flash.WearOptions{RatedEndurance: 3000, ProgramFailureAtRated: 1e-4, EraseFailureAtRated: 1e-3,
		FailureExponent: 3, EraseLimitFactor: 3}
	p.Fit = flash.RBERFit{Fresh: 1e-7, AtRated: 3e-4, RatedEndurance: 3000, WearExponent: 2, RetentionPerDecade: 0.3, ReadDisturbPerRead: 1e-10}
	p.CodewordBytes, p.CorrectableBits, p.PageSigma = 1024, 40, 0.3
	return p
}

// All returns the built-in device presets by name: "small", "sdf", "tlc"
// and "qlc".
func All() map[string]Preset {
	return map[string]Preset{
		"small": withMLC25nm(Preset{
			Name:     "small",
			Geometry: flash.SmallGeometry(),
			// Round numbers for tests: 50 us read, 500 us program, 3 ms
			// erase, 100 MB/s bus.
			Timing: flash.Timing{ReadLatency: 50 * time.Microsecond, ProgramLatency: 500 * time.Microsecond,
				EraseLatency: 3 * time.Millisecond, ChannelBytesPerSecond: 100_000_000},
			Notes: "test device",
		}),
		"sdf": withMLC25nm(Preset{
			Name:     "sdf",
			Geometry: flash.SDFGeometry(16),
			// SDF 002 Table 3: 40 MHz asynchronous 8-bit channel interface,
			// so 40 MB/s per channel; 44 x 8 KiB per 8.64 KB transfer gives
			// the 1.67 GB/s raw read bandwidth of section 3.2. 25 nm MLC
			// datasheet-class tR = 50 us. tPROG is 1.3 ms for a two-plane
			// program in such parts; folded to one 8 KB page per die it is
			// taken as 0.5 ms, so 88 dies x 8 KB / (0.216 + 0.5) ms gives
			// the 1.01 GB/s raw write bandwidth of section 3.2. tBERS = 4.4
			// ms makes 88 dies erase 2 MB blocks at the 40 GB/s section
			// 3.2 reports.
			Timing: flash.Timing{ReadLatency: 50 * time.Microsecond, ProgramLatency: 500 * time.Microsecond,
				EraseLatency: 4400 * time.Microsecond, ChannelBytesPerSecond: 40_000_000},
			Notes: "SDF 002 Table 3, scaled to 16 blocks per die",
		}),
		"tlc": {
			Name: "tlc",
			// 3D TLC: 16 KiB pages with 1952 spare bytes (18336-byte pages),
			// 4 dies per channel, 8 channels, 384-page blocks (6 MiB).
			Geometry: flash.Geometry{Channels: 8, DiesPerChannel: 4, BlocksPerDie: 32, PagesPerBlock: 384, PageSize: 16384, OOBSize: 1952},
			// Representative 3D TLC values from vendors' public datasheets
			// and ONFI 4.x: tR 60 us, tPROG 700 us per page, tBERS 3.5 ms,
			// an 800 MT/s NV-DDR3 bus (800 MB/s).
			Timing: flash.Timing{ReadLatency: 60 * time.Microsecond, ProgramLatency: 700 * time.Microsecond,
				EraseLatency: 3500 * time.Microsecond, ChannelBytesPerSecond: 800_000_000},
			// TLC endurance of 1,000-3,000 P/E (Cai et al., "Error
			// Characterization, Mitigation, and Recovery in Flash-Memory-
			// Based Solid-State Drives", Proc. IEEE 2017, section 1);
			// LDPC modelled as t = 120 per 2 KiB codeword.
			Wear: flash.WearOptions{RatedEndurance: 3000, ProgramFailureAtRated: 2e-4, EraseFailureAtRated: 2e-3,
				FailureExponent: 3, EraseLimitFactor: 2},
			Fit:           flash.RBERFit{Fresh: 1e-6, AtRated: 2e-3, RatedEndurance: 3000, WearExponent: 2, RetentionPerDecade: 0.5, ReadDisturbPerRead: 5e-10},
			CodewordBytes: 2048, CorrectableBits: 120, PageSigma: 0.4,
			Notes: "representative 3D TLC",
		},
		"qlc": {
			Name:     "qlc",
			Geometry: flash.Geometry{Channels: 8, DiesPerChannel: 4, BlocksPerDie: 32, PagesPerBlock: 256, PageSize: 16384, OOBSize: 2048},
			// Representative QLC values: tR 120 us, tPROG 2.5 ms, tBERS
			// 10 ms, 800 MB/s bus; rated 1,000 P/E (QLC endurance of a few
			// hundred to 1,000 cycles: DIRECT 000 Figure 1, Cai et al.
			// 2017). LDPC modelled as t = 250 per 4 KiB codeword.
			Timing: flash.Timing{ReadLatency: 120 * time.Microsecond, ProgramLatency: 2500 * time.Microsecond,
				EraseLatency: 10 * time.Millisecond, ChannelBytesPerSecond: 800_000_000},
			Wear: flash.WearOptions{RatedEndurance: 1000, ProgramFailureAtRated: 5e-4, EraseFailureAtRated: 5e-3,
				FailureExponent: 3, EraseLimitFactor: 2},
			Fit:           flash.RBERFit{Fresh: 5e-6, AtRated: 5e-3, RatedEndurance: 1000, WearExponent: 2, RetentionPerDecade: 0.8, ReadDisturbPerRead: 2e-9},
			CodewordBytes: 4096, CorrectableBits: 250, PageSigma: 0.5,
			Notes: "representative QLC",
		},
	}
}

// Names lists the presets in alphabetical order.
func Names() []string {
	var names []string
	for n := range All() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the named preset.
func Lookup(name string) (Preset, error) {
	p, ok := All()[name]
	if !ok {
		return Preset{}, base.InvalidArgumentf("flash: unknown preset %q (have %v)", name, Names())
	}
	return p, nil
}
