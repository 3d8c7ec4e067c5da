package flash

import (
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/model"
)

// ErrorModel decides the bit errors of page reads. The device asks it once
// per die for a DieErrorModel, and serializes calls on each of those (they
// run under the die's lock), so a die model may keep per-die state without
// locking.
type ErrorModel interface {
	ForDie(die DieAddr) DieErrorModel
	String() string
}

// DieErrorModel acts on one read of a programmed page.
type DieErrorModel interface {
	// ApplyRead is given the page as stored in the cells (buf: data then
	// OOB) and the page's condition. It flips the bits that the host will
	// see wrong, directly in buf, and says what it did. rng is the die's
	// seeded random source.
	ApplyRead(c PageCondition, rng *rand.Rand, buf []byte) ReadEffect
}

// PageCondition is what determines a page's raw bit error rate.
type PageCondition struct {
	Addr PageAddr
	// EraseCount is the block's P/E cycles so far.
	EraseCount int
	// ReadsSinceErase counts the block's reads since its last erase,
	// including this one.
	ReadsSinceErase int64
	// Retention is the time since the block was programmed.
	Retention time.Duration
	// HostBytes is how many leading bytes of the page the host receives:
	// PageSize, plus OOBSize when it asked for the spare area. The cells
	// and the ECC always cover the whole page; a bus-level model (UBER)
	// acts on the returned bytes only.
	HostBytes int
}

// ReadEffect is what an error model did to one read.
type ReadEffect struct {
	// Status is what the device's ECC reports.
	Status ReadStatus
	// RawBitErrors is the number of raw bit errors sampled in the cells
	// (before ECC).
	RawBitErrors int
	// FlippedBits is the number of bits of buf flipped, that is returned
	// wrong to the host.
	FlippedBits int
	// InjectedFlips is the part of FlippedBits injected by an evaluation
	// method (UBERModel, Faults) rather than sampled as cell errors.
	InjectedFlips int
	// Persist asks the device to write buf back into the stored page: the
	// flips are in the cells, not only on the bus.
	Persist bool
}

// flipBit inverts bit i of buf (bit 0 is the least significant bit of
// buf[0]).
func flipBit(buf []byte, i int) { buf[i>>3] ^= 1 << (i & 7) }

// geometricGap samples the number of good bits before the next error in a
// Bernoulli process where each bit is in error with probability p (0 < p <
// 1): floor(ln U / ln(1-p)), U uniform in (0, 1]. Sampling gaps instead of
// one trial per bit is what makes error injection cheap (DIRECT 000 section
// 5: one flip per 1/UBER bits read).
func geometricGap(rng *rand.Rand, p float64) int64 {
	u := 1 - rng.Float64() // (0, 1]
	g := math.Log(u) / math.Log1p(-p)
	if g >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(g)
}

// UBERModel is DIRECT's evaluation method (DIRECT 000 section 5, "Error
// Injection"): every bit read flips with probability UBER, independently, and
// the device reports nothing (no ECC status): only checksums above can
// notice. Flips are transient (on the returned bytes only) or, with
// Persistent, written back into the stored page.
type UBERModel struct {
	UBER       float64
	Persistent bool
}

var _ ErrorModel = UBERModel{}

func (m UBERModel) String() string {
	kind := "transient"
	if m.Persistent {
		kind = "persistent"
	}
	return fmt.Sprintf("uber(%g,%s)", m.UBER, kind)
}

func (m UBERModel) validate(Geometry) error {
	if !(m.UBER >= 0 && m.UBER < 1) {
		return base.InvalidArgumentf("flash: UBER %g outside [0, 1)", m.UBER)
	}
	return nil
}

// ForDie implements ErrorModel.
func (m UBERModel) ForDie(DieAddr) DieErrorModel { return &uberDie{m: m, gap: -1} }

// uberDie carries the gap to the next flip across reads, so the die's read
// stream is one Bernoulli process whatever the page size.
type uberDie struct {
	m   UBERModel
	gap int64 // good bits left before the next flip; -1: not sampled yet
}

func (u *uberDie) ApplyRead(c PageCondition, rng *rand.Rand, buf []byte) ReadEffect {
	if u.m.UBER == 0 {
		return ReadEffect{}
	}
	if c.HostBytes > 0 && c.HostBytes < len(buf) {
		buf = buf[:c.HostBytes]
	}
	nbits := int64(len(buf)) * 8
	var eff ReadEffect
	pos := int64(0)
	for {
		if u.gap < 0 {
			u.gap = geometricGap(rng, u.m.UBER)
		}
		if u.gap >= nbits-pos {
			u.gap -= nbits - pos
			break
		}
		pos += u.gap
		flipBit(buf, int(pos))
		eff.FlippedBits++
		pos++
		u.gap = -1
	}
	eff.RawBitErrors = eff.FlippedBits
	eff.InjectedFlips = eff.FlippedBits
	eff.Persist = u.m.Persistent && eff.FlippedBits > 0
	return eff
}

// PhysicalModel samples raw bit errors from a raw bit error rate (RBER) that
// depends on the page's wear, retention and read disturb (RBERFit), with a
// per-page variation, and applies an ECC that corrects up to
// CorrectableBits errors per codeword of CodewordBytes.
//
// Per codeword the raw error count is Binomial(codeword bits, RBER) (sampled
// exactly by geometric gaps). At most t errors: ECC corrects them, the data
// is clean and the status reports the corrected count. More than t: the page
// is uncorrectable, the status says so, and the raw errors stay in the
// returned content. The closed form for the uncorrectable-codeword
// probability is the binomial tail P[X > t] (internal/model).
type PhysicalModel struct {
	Fit RBERFit
	// CodewordBytes is the ECC codeword's payload (the page, data then
	// OOB, is cut into codewords of this size; the last may be shorter).
	CodewordBytes int
	// CorrectableBits is t: errors per codeword the ECC corrects.
	CorrectableBits int
	// PageSigma is the standard deviation of ln(RBER) across pages: each
	// page's RBER is the fit times a log-normal factor with mean 1, fixed for
	// the page until its block is erased (process variation; 0: none).
	PageSigma float64
	// Seed makes the per-page factors reproducible.
	Seed int64
}

var _ ErrorModel = PhysicalModel{}

func (m PhysicalModel) String() string {
	return fmt.Sprintf("physical(%s, ecc t=%d per %dB, sigma=%g)", m.Fit, m.CorrectableBits, m.CodewordBytes, m.PageSigma)
}

func (m PhysicalModel) validate(g Geometry) error {
	if m.CodewordBytes <= 0 || m.CorrectableBits < 0 || m.PageSigma < 0 || math.IsNaN(m.PageSigma) {
		return base.InvalidArgumentf("flash: bad physical model %s", m)
	}
	return m.Fit.validate()
}

// ForDie implements ErrorModel.
func (m PhysicalModel) ForDie(d DieAddr) DieErrorModel { return &physicalDie{m: m} }

type physicalDie struct {
	m   PhysicalModel
	pos []int // scratch: error positions in the current codeword
}

// pageFactor is the page's log-normal RBER multiplier with mean 1, a pure
// function of (seed, page, erase count).
func (m PhysicalModel) pageFactor(c PageCondition) float64 {
	if m.PageSigma == 0 {
		return 1
	}
	h := splitmix(uint64(m.Seed) ^ splitmix(uint64(c.Addr.Channel)<<48^uint64(c.Addr.Die)<<40^
		uint64(c.Addr.Block)<<20^uint64(c.Addr.Page)) ^ splitmix(uint64(c.EraseCount)+0x9e37))
	u1 := (float64(h>>11) + 0.5) / (1 << 53)
	u2 := (float64(splitmix(h)>>11) + 0.5) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	s := m.PageSigma
	return math.Exp(s*z - s*s/2)
}

// RBER is the page's raw bit error rate under the model, per-page factor
// included.
func (m PhysicalModel) RBER(c PageCondition) float64 {
	return math.Min(m.Fit.RBER(c.EraseCount, c.Retention, c.ReadsSinceErase)*m.pageFactor(c), 0.5)
}

func (p *physicalDie) ApplyRead(c PageCondition, rng *rand.Rand, buf []byte) ReadEffect {
	rber := p.m.RBER(c)
	var eff ReadEffect
	if rber <= 0 {
		return eff
	}
	cw := p.m.CodewordBytes
	for start := 0; start < len(buf); start += cw {
		end := min(start+cw, len(buf))
		nbits := int64(end-start) * 8
		p.pos = p.pos[:0]
		for pos := geometricGap(rng, rber); pos < nbits; pos += 1 + geometricGap(rng, rber) {
			p.pos = append(p.pos, start*8+int(pos))
		}
		n := len(p.pos)
		eff.RawBitErrors += n
		if n <= p.m.CorrectableBits {
			eff.Status.CorrectedBits += n
			continue
		}
		eff.Status.Uncorrectable = true
		for _, b := range p.pos {
			flipBit(buf, b)
		}
		eff.FlippedBits += n
	}
	return eff
}

// splitmix is the SplitMix64 finalizer, a cheap well-mixing hash.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// RBERFit is the raw bit error rate of a page as a function of wear (P/E
// cycles), retention time and read disturb:
//
//	wear(pe)  = Fresh + (AtRated - Fresh) * (pe / RatedEndurance)^WearExponent
//	ret(t)    = 1 + RetentionPerDecade * (0.5 + pe/RatedEndurance) * log10(1 + t/1h)
//	RBER      = wear(pe) * ret(t) + ReadDisturbPerRead * reads * (1 + pe/RatedEndurance)
//
// The shape follows the published characterizations: RBER grows as a power
// law of P/E cycles (Mielke et al., "Bit Error Rate in NAND Flash Memories",
// IRPS 2008), retention errors grow with the logarithm of time and faster on
// worn cells (Cai et al., "Flash Correct-and-Refresh", ICCD 2012), and read
// disturb errors grow linearly with reads since programming, faster on worn
// cells (Cai et al., "Read Disturb Errors in MLC NAND Flash Memory", DSN 2015).
// The constants of the presets are round numbers in the ranges those papers
// report, not a fit to one chip.
type RBERFit struct {
	Fresh              float64 // RBER at 0 P/E, no retention, no reads
	AtRated            float64 // RBER at RatedEndurance P/E
	RatedEndurance     int
	WearExponent       float64
	RetentionPerDecade float64 // relative RBER growth per decade of hours
	ReadDisturbPerRead float64 // absolute RBER added per read since erase
}

func (f RBERFit) String() string {
	return fmt.Sprintf("rber %g..%g@%dPE ^%g ret=%g/dec rd=%g/read",
		f.Fresh, f.AtRated, f.RatedEndurance, f.WearExponent, f.RetentionPerDecade, f.ReadDisturbPerRead)
}

func (f RBERFit) validate() error {
	ok := f.Fresh >= 0 && f.Fresh <= 0.5 && f.AtRated >= f.Fresh && f.AtRated <= 0.5 &&
		f.RatedEndurance > 0 && f.WearExponent >= 0 && f.RetentionPerDecade >= 0 && f.ReadDisturbPerRead >= 0
	if !ok {
		return base.InvalidArgumentf("flash: bad RBER fit %s", f)
	}
	return nil
}

// ConstantRBER is a fit whose RBER is r whatever the page's condition.
func ConstantRBER(r float64) RBERFit {
	return RBERFit{Fresh: r, AtRated: r, RatedEndurance: 1}
}

// RBER evaluates the fit.
func (f RBERFit) RBER(pe int, retention time.Duration, reads int64) float64 {
	wearFrac := float64(pe) / float64(f.RatedEndurance)
	wear := f.Fresh + (f.AtRated-f.Fresh)*math.Pow(wearFrac, f.WearExponent)
	ret := 1.0
	if retention > 0 && f.RetentionPerDecade > 0 {
		ret += f.RetentionPerDecade * (0.5 + wearFrac) * math.Log10(1+retention.Hours())
	}
	return wear*ret + f.ReadDisturbPerRead*float64(reads)*(1+wearFrac)
}

// applyErrorModel runs the die's error model on a read of a programmed page
// (buf holds its stored content), applies injected faults, writes persistent
// flips back, and counts. The caller holds d.mu.
func (e *Emulator) applyErrorModel(d *die, b *blockState, a PageAddr, now time.Time, buf []byte, hostBytes int) (ReadStatus, error) {
	var eff ReadEffect
	if d.model != nil {
		c := PageCondition{
			Addr:            a,
			EraseCount:      int(b.eraseCount),
			ReadsSinceErase: b.readsSinceErase,
			HostBytes:       hostBytes,
		}
		if b.programUnixNano != 0 {
			c.Retention = max(0, now.Sub(time.Unix(0, b.programUnixNano)))
		}
		eff = d.model.ApplyRead(c, d.rng, buf)
	}
	if e.inject != nil {
		e.inject.applyRead(a, buf, &eff)
	}
	if eff.Persist {
		if err := e.st.WritePage(e.flatPage(a), buf); err != nil {
			return ReadStatus{}, err
		}
	}
	d.ctr.bitsRead.Add(int64(hostBytes) * 8)
	d.ctr.bitsSensed.Add(int64(len(buf)) * 8)
	d.ctr.rawBitErrors.Add(int64(eff.RawBitErrors))
	d.ctr.correctedBits.Add(int64(eff.Status.CorrectedBits))
	d.ctr.flippedBits.Add(int64(eff.FlippedBits))
	d.ctr.injectedFlips.Add(int64(eff.InjectedFlips))
	if eff.Status.Uncorrectable {
		d.ctr.uncorrectable.Add(1)
	}
	return eff.Status, nil
}

// UncorrectablePageProbability is the closed form for one read of a page of
// pageBytes (data and OOB) at raw bit error rate rber: the page is
// uncorrectable when any of its codewords has more than CorrectableBits
// errors, each codeword failing with the binomial tail
// model.CodewordFailureProbability.
func (m PhysicalModel) UncorrectablePageProbability(pageBytes int, rber float64) float64 {
	ok := 1.0
	for start := 0; start < pageBytes; start += m.CodewordBytes {
		n := min(m.CodewordBytes, pageBytes-start) * 8
		if m.CorrectableBits >= n {
			continue
		}
		ok *= 1 - model.CodewordFailureProbability(rber, n, m.CorrectableBits)
	}
	return 1 - ok
}
