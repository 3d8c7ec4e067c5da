package wear

import (
	"math"
	"slices"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/model"
)

// Decisions is what one epoch decided.
type Decisions struct {
	Epoch uint32
	// Mean and Sigma of the up servers' erase counts as reported (sigma is
	// the population standard deviation, the paper's wear variance).
	Mean, Sigma float64
	// SigmaEstimated is the wear variance the balancer expects after
	// HorizonEpochs of the current write rates with its decisions applied,
	// as a fraction of the expected mean (eq. 2).
	SigmaEstimated float64
	// HotThreshold is l_hot for this epoch (0 when ARPT did not run).
	HotThreshold float64
	// Which algorithms ran (their trigger held).
	ARPT, HCDS, EDM bool
	// Counts of what was decided.
	LateREP, LateEC, Cancelled, Remapped, Swapped int
	// Changed holds every row this epoch changed, in order (to persist).
	Changed []Entry
	// Moves are copies to make now.
	Moves []Move
}

// CV is the coefficient of variation of the reported erase counts.
func (d Decisions) CV() float64 {
	if d.Mean <= 0 {
		return 0
	}
	return d.Sigma / d.Mean
}

// Epoch ends an epoch: it takes the flash monitor's statistics, ages every
// object's popularity (eq. 1), and runs the mode's algorithms. It returns
// the changes it made to the mapping table and the moves to carry out.
// Servers missing from stats keep their last statistics.
func (b *Balancer) Epoch(stats []ServerStats) (Decisions, error) {
	if err := b.monitor(stats); err != nil {
		return Decisions{}, err
	}
	b.Compact()
	b.epoch++
	for i := range b.objs {
		o := &b.objs[i]
		o.pop = model.DecayPopularity(o.pop, o.writes)
		o.heat = model.DecayPopularity(o.heat, o.written)
		o.writes, o.written = 0, 0
	}
	d := Decisions{Epoch: b.epoch}
	est := b.newEstimate()
	d.Mean, d.Sigma = est.reported()
	logStart := len(b.table.log)
	switch b.opts.Mode {
	case ModeREPEC:
		b.ageToEC(&d)
	case ModeEDM:
		if b.opts.hcdsTrigger().exceeded(d.Mean, d.Sigma) {
			d.EDM = true
			b.edm(&d, est)
		}
	case ModeChameleon:
		if b.opts.arptTrigger().exceeded(d.Mean, d.Sigma) {
			d.ARPT = true
			b.arpt(&d, est)
		}
		if b.opts.hcdsTrigger().exceeded(d.Mean, d.Sigma) {
			d.HCDS = true
			b.hcds(&d, est)
		}
		b.fallback(&d)
	}
	d.SigmaEstimated = est.cv()
	for _, r := range b.table.log[logStart:] {
		d.Changed = append(d.Changed, r.Entry)
	}
	return d, nil
}

// monitor is the flash monitor: it keeps each server's last statistics and
// its erase rate (erases since the previous epoch).
func (b *Balancer) monitor(stats []ServerStats) error {
	for _, st := range stats {
		if st.Node == 0 {
			return base.InvalidArgumentf("wear: statistics of node 0")
		}
		if !(st.Erases >= 0) || !(st.Utilization >= 0 && st.Utilization <= 1) ||
			!(st.VictimUtilization >= 0 && st.VictimUtilization < 1) || st.CapacityBytes < 0 {
			return base.InvalidArgumentf("wear: statistics of %v out of range: %+v", st.Node, st)
		}
		s := b.servers[st.Node]
		if s == nil {
			s = &server{}
			b.servers[st.Node] = s
		}
		if s.reported {
			s.EraseRate = math.Max(0, st.Erases-s.Erases)
		}
		s.ServerStats = st
		s.reported = true
	}
	return nil
}

// Server returns the flash monitor's view of n: its last statistics and its
// erase rate per epoch.
func (b *Balancer) Server(n base.NodeID) (ServerStats, float64, bool) {
	s := b.servers[n]
	if s == nil {
		return ServerStats{}, 0, false
	}
	return s.ServerStats, s.EraseRate, true
}

// estimate projects each up server's erase count HorizonEpochs ahead:
// reported erases plus eq. 2 applied to the page writes that the objects
// whose destination layout holds a part there will send it at their
// current write heat. Moving a part moves its share from one server to the
// other. NB: Algorithms 1 and 2 only add the moved object's erases to its
// new servers; taking them off the old ones too is what makes the
// estimated variance fall when hot data leaves a worn server.
type estimate struct {
	b      *Balancer
	nodes  []base.NodeID // up servers, sorted
	index  []int32       // node ID -> position in nodes + 1 (0: not an up server), when IDs are dense
	sparse map[base.NodeID]int
	est    []float64
	mu     []float64 // victim utilization, clamped
	cap    []float64 // capacity bytes (0 unknown)
	util   []float64 // utilization, raised by the bytes placed this epoch
	tree   *extremaTree
	sum    float64
	sumSq  float64
}

func (b *Balancer) newEstimate() *estimate {
	e := &estimate{b: b}
	for n, s := range b.servers {
		if s.reported && s.Up {
			e.nodes = append(e.nodes, n)
		}
	}
	slices.Sort(e.nodes)
	if len(e.nodes) > 0 && uint64(e.nodes[len(e.nodes)-1]) <= 4*uint64(len(e.nodes))+1024 {
		e.index = make([]int32, e.nodes[len(e.nodes)-1]+1)
	} else {
		e.sparse = map[base.NodeID]int{}
	}
	for i, n := range e.nodes {
		s := b.servers[n]
		if e.sparse != nil {
			e.sparse[n] = i
		} else {
			e.index[n] = int32(i + 1)
		}
		e.est = append(e.est, s.Erases)
		e.mu = append(e.mu, math.Min(s.VictimUtilization, 0.95))
		e.cap = append(e.cap, float64(s.CapacityBytes))
		e.util = append(e.util, s.Utilization)
	}
	for i := range b.objs {
		o := &b.objs[i]
		// Parts decided but not written yet (an intermediate state's new
		// parts) will take room: count them, so that one epoch's decisions
		// do not fill a server another epoch already promised. Writing them
		// (the next write, or the migration fallback) will also cost their
		// whole pages there.
		if src, dst := o.entry.Src, o.entry.Dst; o.entry.State.Intermediate() {
			for p := 0; p < dst.Width(); p++ {
				if src.Redundancy == dst.Redundancy && src.Node(p) == dst.Node(p) {
					continue
				}
				if k, ok := e.k(dst.Node(p)); ok {
					e.place(k, dst.Redundancy.PartBytes(o.size))
					e.est[k] += e.rewriteErases(o, o.entry.State, dst.Redundancy, k)
				}
			}
		}
		if o.heat == 0 {
			continue
		}
		dst := o.entry.Dst
		for p := 0; p < dst.Width(); p++ {
			if k, ok := e.k(dst.Node(p)); ok {
				e.est[k] += e.partErases(o, dst.Redundancy, p, k)
			}
		}
	}
	for _, v := range e.est {
		e.sum += v
		e.sumSq += v * v
	}
	e.tree = newExtremaTree(e.est)
	return e
}

// k is the position of an up server.
func (e *estimate) k(n base.NodeID) (int, bool) {
	if e.sparse != nil {
		k, ok := e.sparse[n]
		return k, ok
	}
	if uint64(n) >= uint64(len(e.index)) || e.index[n] == 0 {
		return 0, false
	}
	return int(e.index[n] - 1), true
}

// partErases is eq. 2 for part p of o in a layout of redundancy r on
// server k over the horizon. W_t of eq. 2 is the part's page writes: o's
// write rate (eq. 1's steady state is twice the per-epoch rate) times the
// pages each write programs there (partPagesPerWrite).
func (e *estimate) partErases(o *object, r Redundancy, p, k int) float64 {
	o2 := e.b.opts
	if o.heat <= 0 || o.pop <= 0 {
		return 0
	}
	writes := o.pop / 2 * o2.HorizonEpochs
	pages := writes * partPagesPerWrite(r, p, o.heat/o.pop, o.size, o2.PageBytes)
	v, err := model.EraseEstimate(pages, o2.PagesPerBlock, e.mu[k])
	if err != nil {
		return 0 // unreachable: inputs are bounded above
	}
	return v
}

// partPagesPerWrite is the pages one write of about perWrite bytes to an
// object of size bytes programs on part p of a layout of redundancy r: a
// copy takes every page; a data shard a quarter of them (the object's
// pages are dealt round-robin over the data shards in 4 KiB units); a
// parity shard one page per stripe row the write touches, which is 1 +
// (w-1)/4 rows for w pages at a random offset and at most the object's
// rows. NB: a parity shard is written as often as all the data shards
// together for a one-page update (three pages programmed per 4 KiB, as
// REP); charging it a quarter of the bytes, as for a data shard, would
// hide most of an EC object's wear on its two parity servers.
func partPagesPerWrite(r Redundancy, p int, perWrite float64, size int64, pageBytes int) float64 {
	w := math.Max(1, perWrite/float64(pageBytes))
	if r == REP {
		return w
	}
	if p < ECData {
		return w / ECData
	}
	rows := 1 + (w-1)/ECData
	if size > 0 {
		objRows := math.Ceil(math.Ceil(float64(size)/float64(pageBytes)) / ECData)
		rows = math.Min(rows, objRows)
	}
	return rows
}

// rewriteErases is eq. 2 for writing a whole new part of o on server k: a
// late conversion or an offload writes the part whole on the object's next
// write, and the migration fallback copies an EWO part left unwritten, so
// the part's pages land there once whatever the object's heat. A late
// state of an object that is not written within the horizon costs nothing
// (it converts only on a write): it is charged with the chance of a write,
// 1 - exp(-rate * horizon) at the object's current write rate.
func (e *estimate) rewriteErases(o *object, state State, r Redundancy, k int) float64 {
	o2 := e.b.opts
	pages := math.Ceil(float64(r.PartBytes(o.size)) / float64(o2.PageBytes))
	if state == StateLateREP || state == StateLateEC {
		pages *= 1 - math.Exp(-o.pop/2*o2.HorizonEpochs)
	}
	v, err := model.EraseEstimate(pages, o2.PagesPerBlock, e.mu[k])
	if err != nil {
		return 0
	}
	return v
}

// reported is the mean and standard deviation of the reported erase counts.
func (e *estimate) reported() (mean, sigma float64) {
	if len(e.nodes) == 0 {
		return 0, 0
	}
	var sum, sumSq float64
	for _, n := range e.nodes {
		v := e.b.servers[n].Erases
		sum += v
		sumSq += v * v
	}
	n := float64(len(e.nodes))
	mean = sum / n
	return mean, math.Sqrt(math.Max(0, sumSq/n-mean*mean))
}

// cv is the estimated coefficient of variation.
func (e *estimate) cv() float64 {
	mean, sigma := e.meanSigma()
	if mean <= 0 {
		return 0
	}
	return sigma / mean
}

// meanSigma is the mean and standard deviation of the estimated erase
// counts (0, 0 without servers or erases).
func (e *estimate) meanSigma() (mean, sigma float64) {
	n := float64(len(e.nodes))
	if n == 0 || e.sum <= 0 {
		return 0, 0
	}
	mean = e.sum / n
	return mean, math.Sqrt(math.Max(0, e.sumSq/n-mean*mean))
}

// above reports whether the estimated wear variance passes t.
func (e *estimate) above(t wearTrigger) bool {
	return t.exceeded(e.meanSigma())
}

// meanSigmaAfter is the estimated mean and standard deviation if the
// deltas were applied.
func (e *estimate) meanSigmaAfter(ds []serverDelta) (mean, sigma float64) {
	sum, sumSq := e.sum, e.sumSq
	for _, d := range ds {
		old := e.est[d.k]
		sum += d.v
		sumSq += (old+d.v)*(old+d.v) - old*old
	}
	n := float64(len(e.nodes))
	if n == 0 {
		return 0, 0
	}
	mean = sum / n
	return mean, math.Sqrt(math.Max(0, sumSq/n-mean*mean))
}

// lowersUpperTail reports whether the deltas lower the estimated mean plus
// one standard deviation of the erase counts: the wear of the more worn
// servers, counting the erases the change adds everywhere.
//
// NB: this is ARPT's test for an upgrade (EC to REP), not the paper's
// words. Chameleon's first two goals are fewer worn-out devices and a
// longer average lifespan (section III), and ARPT balances "while
// ensuring ... low erasure overhead" (section III-B). An upgrade programs
// more pages than the EC layout it replaces (three copies against a
// quarter per data shard and a page per stripe row per parity shard), so
// it raises the mean; putting those copies on the least worn servers
// lowers the standard deviation whatever they cost (adding erases below
// the mean always does), so a test on the standard deviation (or on sigma
// over mean) alone would take any upgrade that lands on the least worn
// servers. Mean plus sigma takes an upgrade only when the wear it takes
// off the more worn servers exceeds the erases it adds.
func (e *estimate) lowersUpperTail(ds []serverDelta) bool {
	m0, s0 := e.meanSigma()
	m1, s1 := e.meanSigmaAfter(ds)
	return m1+s1 < m0+s0
}

// cvAfter is the estimated coefficient of variation if the deltas were
// applied.
func (e *estimate) cvAfter(ds []serverDelta) float64 {
	mean, sigma := e.meanSigmaAfter(ds)
	if mean <= 0 {
		return 0
	}
	return sigma / mean
}

func (e *estimate) add(k int, v float64) {
	old := e.est[k]
	e.est[k] = old + v
	e.sum += v
	e.sumSq += e.est[k]*e.est[k] - old*old
	e.tree.set(k, e.est[k])
}

// room reports whether server k can take bytes more without passing the
// utilization bound.
func (e *estimate) room(k int, bytes int64) bool {
	if !e.b.usable(e.nodes[k]) {
		return false
	}
	if e.cap[k] <= 0 {
		return e.util[k] < e.b.opts.MaxUtilization
	}
	return e.util[k]+float64(bytes)/e.cap[k] < e.b.opts.MaxUtilization
}

func (e *estimate) place(k int, bytes int64) {
	if e.cap[k] > 0 {
		e.util[k] += float64(bytes) / e.cap[k]
	}
}

// retarget moves o's future writes from layout from to layout to in the
// estimate and charges the new parts' bytes to their servers. When state
// is an intermediate state (a conversion or an offload decided now) the new
// parts will also be written whole there (rewriteErases); a cancelled
// decision (state a redundancy state) returns to parts that exist and
// takes back the rewrite charged when it was decided.
func (e *estimate) retarget(o *object, from, to Layout, state State) {
	e.apply(o, e.retargetDelta(o, from, to, state), from, to)
}

// retargetDelta is the change retarget would make to each server's
// estimate (at most 2*MaxWidth servers).
func (e *estimate) retargetDelta(o *object, from, to Layout, state State) []serverDelta {
	var out []serverDelta
	addTo := func(k int, v float64) {
		for i := range out {
			if out[i].k == k {
				out[i].v += v
				return
			}
		}
		out = append(out, serverDelta{k: k, v: v})
	}
	for p := 0; p < from.Width(); p++ {
		n := from.Node(p)
		if to.Redundancy == from.Redundancy && to.Node(p) == n {
			continue
		}
		if k, ok := e.k(n); ok {
			v := -e.partErases(o, from.Redundancy, p, k)
			if !state.Intermediate() {
				// Cancelling: the rewrite charged to from's new parts
				// when the decision was made will not happen.
				v -= e.rewriteErases(o, o.entry.State, from.Redundancy, k)
			}
			addTo(k, v)
		}
	}
	for p := 0; p < to.Width(); p++ {
		n := to.Node(p)
		if to.Redundancy == from.Redundancy && from.Node(p) == n {
			continue
		}
		if k, ok := e.k(n); ok {
			v := e.partErases(o, to.Redundancy, p, k)
			if state.Intermediate() {
				v += e.rewriteErases(o, state, to.Redundancy, k)
			}
			addTo(k, v)
		}
	}
	return out
}

// serverDelta is a change of server k's estimate.
type serverDelta struct {
	k int
	v float64
}

// apply adds the deltas and charges the bytes of o's new parts in to.
func (e *estimate) apply(o *object, ds []serverDelta, from, to Layout) {
	for _, d := range ds {
		e.add(d.k, d.v)
	}
	for p := 0; p < to.Width(); p++ {
		n := to.Node(p)
		if to.Redundancy == from.Redundancy && from.Node(p) == n {
			continue
		}
		if k, ok := e.k(n); ok {
			e.place(k, to.Redundancy.PartBytes(o.size))
		}
	}
}

// extremes returns up to n servers with the lowest (or highest) estimate
// that can take bytes (any server when bytes < 0), lowest (highest) first,
// skipping avoid.
func (e *estimate) extremes(n int, highest bool, bytes int64, avoid func(base.NodeID) bool) []int {
	var out, masked []int
	for len(out) < n {
		var k int
		var ok bool
		if highest {
			k, ok = e.tree.max()
		} else {
			k, ok = e.tree.min()
		}
		if !ok {
			break
		}
		e.tree.mask(k, true)
		masked = append(masked, k)
		if (bytes >= 0 && !e.room(k, bytes)) || (avoid != nil && avoid(e.nodes[k])) {
			continue
		}
		out = append(out, k)
	}
	for _, k := range masked {
		e.tree.mask(k, false)
	}
	return out
}

// extremaTree is a segment tree over the servers' estimates answering the
// lowest and the highest (ties: the lower position) in O(1) and updating in
// O(log n), so that a balancing loop over 10,000 servers costs O(log n) per
// step. Masked positions are left out of both answers, positions in noMax
// out of the highest only.
type extremaTree struct {
	size     int
	val      []float64
	masked   []bool
	noMax    []bool
	mn, mx   []float64
	amn, amx []int32
}

func newExtremaTree(vals []float64) *extremaTree {
	size := 1
	for size < len(vals) {
		size *= 2
	}
	t := &extremaTree{size: size, val: make([]float64, size), masked: make([]bool, size), noMax: make([]bool, size),
		mn: make([]float64, 2*size), mx: make([]float64, 2*size), amn: make([]int32, 2*size), amx: make([]int32, 2*size)}
	for i := 0; i < size; i++ {
		if i < len(vals) {
			t.val[i] = vals[i]
		} else {
			t.masked[i] = true
		}
		t.leaf(i)
	}
	for i := size - 1; i >= 1; i-- {
		t.pull(i)
	}
	return t
}

func (t *extremaTree) leaf(i int) {
	j := t.size + i
	if t.masked[i] {
		t.mn[j], t.mx[j], t.amn[j], t.amx[j] = math.Inf(1), math.Inf(-1), -1, -1
		return
	}
	t.mn[j], t.mx[j], t.amn[j], t.amx[j] = t.val[i], t.val[i], int32(i), int32(i)
	if t.noMax[i] {
		t.mx[j], t.amx[j] = math.Inf(-1), -1
	}
}

func (t *extremaTree) pull(j int) {
	l, r := 2*j, 2*j+1
	if t.amn[r] >= 0 && (t.amn[l] < 0 || t.mn[r] < t.mn[l]) {
		t.mn[j], t.amn[j] = t.mn[r], t.amn[r]
	} else {
		t.mn[j], t.amn[j] = t.mn[l], t.amn[l]
	}
	if t.amx[r] >= 0 && (t.amx[l] < 0 || t.mx[r] > t.mx[l]) {
		t.mx[j], t.amx[j] = t.mx[r], t.amx[r]
	} else {
		t.mx[j], t.amx[j] = t.mx[l], t.amx[l]
	}
}

func (t *extremaTree) update(i int) {
	t.leaf(i)
	for j := (t.size + i) / 2; j >= 1; j /= 2 {
		t.pull(j)
	}
}

func (t *extremaTree) set(i int, v float64) {
	t.val[i] = v
	t.update(i)
}

func (t *extremaTree) mask(i int, on bool) {
	t.masked[i] = on
	t.update(i)
}

// maskMax leaves position i out of (or back in) the highest only.
func (t *extremaTree) maskMax(i int, on bool) {
	t.noMax[i] = on
	t.update(i)
}

func (t *extremaTree) min() (int, bool) { return int(t.amn[1]), t.amn[1] >= 0 }
func (t *extremaTree) max() (int, bool) { return int(t.amx[1]), t.amx[1] >= 0 }

func (e *estimate) layout(r Redundancy, ks []int) (Layout, bool) {
	if len(ks) < r.Width() {
		return Layout{}, false
	}
	nodes := make([]base.NodeID, r.Width())
	for i := range nodes {
		nodes[i] = e.nodes[ks[i]]
	}
	l, err := NewLayout(r, nodes)
	return l, err == nil
}

// hotThreshold is l_hot: the popularity of the object ranked HotFraction
// from the top, and at least HotPopularityMin.
func (b *Balancer) hotThreshold() float64 {
	if len(b.objs) == 0 {
		return b.opts.HotPopularityMin
	}
	rank := min(int(float64(len(b.objs))*b.opts.HotFraction), len(b.objs)-1)
	// The rank-th largest: keep the rank+1 largest in a min-heap.
	h := make([]float64, 0, rank+1)
	for i := range b.objs {
		p := b.objs[i].pop
		if len(h) < rank+1 {
			h = append(h, p)
			for j := len(h) - 1; j > 0 && h[j] < h[(j-1)/2]; j = (j - 1) / 2 {
				h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
			}
			continue
		}
		if p <= h[0] {
			continue
		}
		h[0] = p
		for j := 0; ; {
			l, m := 2*j+1, j
			if l < len(h) && h[l] < h[m] {
				m = l
			}
			if l+1 < len(h) && h[l+1] < h[m] {
				m = l + 1
			}
			if m == j {
				break
			}
			h[j], h[m] = h[m], h[j]
			j = m
		}
	}
	return math.Max(h[0], b.opts.HotPopularityMin)
}

// hotter reports whether object x ranks before y hottest first: higher
// popularity, ties by object ID. colder ranks coldest first.
func (b *Balancer) hotter(x, y int32) bool {
	px, py := b.objs[x].pop, b.objs[y].pop
	if px != py {
		return px > py
	}
	return b.objs[x].entry.Object < b.objs[y].entry.Object
}

func (b *Balancer) colder(x, y int32) bool {
	px, py := b.objs[x].pop, b.objs[y].pop
	if px != py {
		return px < py
	}
	return b.objs[x].entry.Object < b.objs[y].entry.Object
}

// topK returns the k first of idx in the order before (a total order),
// first first, in O(n log k), leaving idx as it was.
func topK(idx []int32, k int, before func(x, y int32) bool) []int32 {
	if k >= len(idx) {
		out := slices.Clone(idx)
		slices.SortFunc(out, func(x, y int32) int { return order(before, x, y) })
		return out
	}
	if k <= 0 {
		return nil
	}
	// A max-heap on "worst kept first" of size k.
	h := make([]int32, 0, k)
	worse := func(i, j int) bool { return before(h[j], h[i]) }
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(h) && worse(l, m) {
				m = l
			}
			if r := l + 1; r < len(h) && worse(r, m) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for _, x := range idx {
		switch {
		case len(h) < k:
			h = append(h, x)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(i, p) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
		case before(x, h[0]):
			h[0] = x
			down(0)
		}
	}
	slices.SortFunc(h, func(x, y int32) int { return order(before, x, y) })
	return h
}

func order(before func(x, y int32) bool, x, y int32) int {
	switch {
	case before(x, y):
		return -1
	case before(y, x):
		return 1
	}
	return 0
}

// arpt is Algorithm 1. Step 1 screens candidates: hot objects in EC are
// upgrade candidates, cold ones (below ColdFactor times l_hot) in REP
// downgrade candidates; a late state whose object changed sides is
// cancelled back to its source (Figure 3's compaction case). Step 2, while
// the estimated wear variance exceeds sigma_ARPT and the remap budget
// lasts, maps the hottest candidate's three copies to the three least worn
// servers (X) and the coldest candidate's six shards to the six most worn
// (Y), each through its late state.
//
// An upgrade is made only there, and only when it lowers the upper tail
// of the estimated erase counts (mean plus standard deviation, see
// lowersUpperTail); upgrade candidates step 2 does not place stay EC.
// Downgrade candidates step 2 does not place convert onto their default
// placement.
//
// NB: section III-B1 says that "downgrade/upgrade operations are delayed as
// long as the wear variance remains tolerable", that ARPT balances "the
// wear while ensuring good performance and low erasure overhead", and
// places every conversion with its greedy remapping (hottest to X); it does
// not say where a candidate the loop does not reach goes. Converting every
// hot object onto its default placement (what this did before) put the
// hottest few percent of the objects, which take most of a skewed
// workload's writes, in REP on whatever servers they hash to: REP programs
// twice EC's pages for whole stripe rows (the paper's own Figure 5(a): REP
// erases about 2x EC), and chameleon-endurance measured Chameleon at
// +28% to +61% of EC's erases, its REP copies 56-84% of its page writes.
// A downgrade lowers the erase overhead ("EC to encode all the remaining
// relatively cold data to realize a low erasure overhead", section III-B),
// so it keeps its default placement when step 2 does not place it.
func (b *Balancer) arpt(d *Decisions, est *estimate) {
	hot := b.hotThreshold()
	d.HotThreshold = hot
	var ups, downs []int32
	for i := range b.objs {
		o := &b.objs[i]
		if o.moving {
			continue
		}
		isHot := o.pop >= hot
		isCold := o.pop < hot*b.opts.ColdFactor
		if o.converted > 0 && b.epoch-o.converted < uint32(b.opts.MinResidenceEpochs) {
			// Converted lately: not converted back yet (a late state
			// may still be cancelled, which costs nothing).
			isHot = isHot && o.entry.State != StateEC
			isCold = isCold && o.entry.State != StateREP
		}
		switch o.entry.State {
		case StateEC:
			if isHot {
				ups = append(ups, int32(i))
			}
		case StateREP:
			if isCold {
				downs = append(downs, int32(i))
			}
		case StateLateREP:
			if isCold {
				b.cancel(o, est)
				d.Cancelled++
			}
		case StateLateEC:
			if isHot {
				b.cancel(o, est)
				d.Cancelled++
			}
		}
	}
	// Step 2 reaches at most MaxRemapsPerEpoch candidates of each kind.
	hotFirst := topK(ups, b.opts.MaxRemapsPerEpoch, b.hotter)
	coldFirst := topK(downs, b.opts.MaxRemapsPerEpoch, b.colder)
	remaps := 0
	convert := func(i int32, state State, dst Layout) {
		o := &b.objs[i]
		src := o.entry.Dst
		est.retarget(o, src, dst, state)
		b.change(o, Entry{Object: o.entry.Object, State: state, Src: src, Dst: dst, Epoch: b.epoch})
		if state == StateLateREP {
			d.LateREP++
		} else {
			d.LateEC++
		}
	}
	// remap maps candidate i to the extreme servers (X or Y). An upgrade
	// is made only when it lowers the upper tail of the estimated erase
	// counts; a downgrade only when X lowers the estimated wear variance
	// more than its default placement would (otherwise step 1 below
	// converts it onto its default placement).
	remap := func(i int32, state State, r Redundancy, extreme Layout) bool {
		o := &b.objs[i]
		src := o.entry.Dst
		ds := est.retargetDelta(o, src, extreme, state)
		if state == StateLateREP {
			if !est.lowersUpperTail(ds) {
				return false
			}
		} else if def, ok := est.placeDefault(o.entry.Object, r, o.size); ok && est.cvAfter(ds) >= est.cvAfter(est.retargetDelta(o, src, def, state)) {
			return false
		}
		convert(i, state, extreme)
		remaps++
		d.Remapped++
		return true
	}
	// Step 2: hottest to X, coldest to Y.
	u, w := 0, 0
	for (u < len(hotFirst) || w < len(coldFirst)) && remaps < b.opts.MaxRemapsPerEpoch && est.above(b.opts.arptTrigger()) {
		if u < len(hotFirst) {
			o := &b.objs[hotFirst[u]]
			if x, ok := est.layout(REP, est.extremes(RepCopies, false, o.size, nil)); ok {
				remap(hotFirst[u], StateLateREP, REP, x)
			}
			u++
		}
		if w < len(coldFirst) && remaps < b.opts.MaxRemapsPerEpoch {
			o := &b.objs[coldFirst[w]]
			if y, ok := est.layout(EC, est.extremes(MaxWidth, true, EC.PartBytes(o.size), nil)); ok {
				remap(coldFirst[w], StateLateEC, EC, y)
			}
			w++
		}
	}
	// Step 1 for the remaining downgrade candidates, in object order: the
	// default placement of EC, on servers with room for the part (counting
	// what this epoch already placed there). The remaining upgrade
	// candidates stay EC (see above).
	for _, i := range downs {
		if o := &b.objs[i]; o.entry.State == StateREP {
			if l, ok := est.placeDefault(o.entry.Object, EC, o.size); ok {
				convert(i, StateLateEC, l)
			}
		}
	}
}

// placeDefault is the object's default placement for redundancy r,
// skipping servers that are not up or lack room for a part of an object
// of size bytes.
func (e *estimate) placeDefault(id ObjectID, r Redundancy, size int64) (Layout, bool) {
	part := r.PartBytes(size)
	nodes := make([]base.NodeID, 0, MaxWidth)
	e.b.placer.Walk(id, func(n base.NodeID) bool {
		if k, ok := e.k(n); ok && e.room(k, part) {
			nodes = append(nodes, n)
		}
		return len(nodes) < r.Width()
	})
	if len(nodes) < r.Width() {
		return Layout{}, false
	}
	l, err := NewLayout(r, nodes)
	return l, err == nil
}

// cancel returns a late object to the redundancy state of its source: the
// conversion never happened, the source still holds the latest version.
func (b *Balancer) cancel(o *object, est *estimate) {
	src := o.entry.Src
	est.retarget(o, o.entry.Dst, src, Stable(src.Redundancy))
	b.change(o, Entry{Object: o.entry.Object, State: Stable(src.Redundancy), Dst: src, Epoch: b.epoch})
}

// candidates lists, per up server, the objects in a redundancy state with
// a part there (not moving): what HCDS and EDM may relocate.
func (b *Balancer) candidates(est *estimate) [][]int32 {
	per := make([][]int32, len(est.nodes))
	for i := range b.objs {
		o := &b.objs[i]
		if o.moving || o.inflight > 0 || o.entry.State.Intermediate() {
			continue
		}
		dst := o.entry.Dst
		for p := 0; p < dst.Width(); p++ {
			if k, ok := est.k(dst.Node(p)); ok {
				per[k] = append(per[k], int32(i))
			}
		}
	}
	return per
}

// relocation is one part of one object to move from server x to server y.
type relocation struct {
	obj  int32
	part int
	gain float64 // erases the move takes off x (and puts on y)
}

// rankedLists hands out each server's candidates in one order: a short
// list of the first rankedShort first, the whole list sorted only if a
// scan runs past it.
type rankedLists struct {
	per    [][]int32
	before func(x, y int32) bool
	short  [][]int32
	full   []bool
}

const rankedShort = 64

func (b *Balancer) ranked(per [][]int32, before func(x, y int32) bool) *rankedLists {
	return &rankedLists{per: per, before: before, short: make([][]int32, len(per)), full: make([]bool, len(per))}
}

// list returns server k's candidates in order; whole asks for all of them.
func (r *rankedLists) list(k int, whole bool) []int32 {
	if whole && !r.full[k] {
		r.short[k] = topK(r.per[k], len(r.per[k]), r.before)
		r.full[k] = true
	} else if r.short[k] == nil {
		r.short[k] = topK(r.per[k], rankedShort, r.before)
		r.full[k] = len(r.short[k]) == len(r.per[k])
	}
	return r.short[k]
}

// pick returns the first object of server k's ranked list that is still in
// a redundancy state, holds a part on server k and none on avoid, and for
// which ok holds.
func (b *Balancer) pick(est *estimate, lists *rankedLists, k int, avoid base.NodeID, ok func(r relocation) bool) (relocation, bool) {
	if r, found := b.pickIn(est, lists.list(k, false), k, avoid, ok); found || lists.full[k] {
		return r, found
	}
	return b.pickIn(est, lists.list(k, true), k, avoid, ok)
}

func (b *Balancer) pickIn(est *estimate, list []int32, k int, avoid base.NodeID, ok func(r relocation) bool) (relocation, bool) {
	n := est.nodes[k]
	for _, i := range list {
		o := &b.objs[i]
		if o.moving || o.entry.State.Intermediate() || o.entry.Dst.Contains(avoid) {
			continue
		}
		p := o.entry.Dst.Index(n)
		if p < 0 {
			continue
		}
		r := relocation{obj: i, part: p, gain: est.partErases(o, o.entry.Dst.Redundancy, p, k)}
		if ok(r) {
			return r, true
		}
	}
	return relocation{}, false
}

// offload puts o in its EWO state with part p of its destination moved to
// node n: its next write goes there.
func (b *Balancer) offload(est *estimate, i int32, p int, n base.NodeID) {
	o := &b.objs[i]
	src := o.entry.Dst
	dst := src.With(p, n)
	state := StateECEWO
	if src.Redundancy == REP {
		state = StateREPEWO
	}
	est.retarget(o, src, dst, state)
	b.change(o, Entry{Object: o.entry.Object, State: state, Src: src, Dst: dst, Epoch: b.epoch})
}

// hcds is Algorithm 2 (paper 004 section III-B2): while the estimated
// wear variance exceeds sigma_HCDS and the remap budget lasts, take the most
// worn server x and the least worn y, and swap the hottest object's part on
// x with the coldest object's part on y. The swap is an endurance-aware
// write offload: both objects enter their EWO state and move on their next
// write (or by the migration fallback). A swap is made only when it narrows
// the gap between x and y counting its costs (estimate.narrows: each part
// that changes server is written whole there); a hot part that would
// overshoot is passed over for a cooler one, and a cold part whose rewrite
// on x costs x more than the hot part takes off is left on y (the hot part
// is offloaded alone, as when y has no colder part). A server x with no part to give (its hot parts already
// swapped this epoch, all on y, too large for the gap, or none) is set
// aside for the epoch and the loop goes on with the next most worn server:
// the algorithm's loop runs while the variance exceeds the threshold, and
// one server with nothing to swap does not end it.
//
// NB: section III-B2's prose disagrees with Algorithm 2 twice; the
// algorithm and eq. 2's accounting are followed. (1) The prose exchanges
// "the coldest object from x and the hottest from y", Algorithm 2 (lines
// 3-4) the hottest from x and the coldest from y; only the latter takes
// wear off the most worn server. (2) The prose estimates x's new erase
// count as E_x + E(obj_i), obj_i being the part x gives away; by Algorithm
// 1's form (E_y = E_y + E(obj_j), each server charged with what is mapped
// to it) x takes E(obj_j), the cold part it receives, and y E(obj_i).
// The estimate also takes each part's share off the server it leaves
// (estimate.retargetDelta), which the paper's formulas leave out.
func (b *Balancer) hcds(d *Decisions, est *estimate) {
	per := b.candidates(est)
	hot, cold := b.ranked(per, b.hotter), b.ranked(per, b.colder)
	remaps := 0
	pairs := est.wornPairs()
	defer pairs.release()
	for remaps+2 <= b.opts.MaxRemapsPerEpoch && est.above(b.opts.hcdsTrigger()) {
		x, y, ok := pairs.next()
		if !ok {
			return
		}
		xNode, yNode := est.nodes[x], est.nodes[y]
		gap := est.est[x] - est.est[y]
		var hds []serverDelta
		h, ok := b.pick(est, hot, x, yNode, func(r relocation) bool {
			o := &b.objs[r.obj]
			if !(r.gain > 0 && r.gain < gap && est.room(y, o.entry.Dst.Redundancy.PartBytes(o.size))) {
				return false
			}
			hds = est.offloadDelta(o, r.part, yNode)
			return est.narrows(x, y, hds)
		})
		if !ok {
			pairs.setAside(x)
			continue
		}
		c, haveCold := b.pick(est, cold, y, xNode, func(r relocation) bool {
			return r.obj != h.obj && r.gain < h.gain
		})
		if haveCold && !est.narrows(x, y, append(hds, est.offloadDelta(&b.objs[c.obj], c.part, xNode)...)) {
			// The cold part's rewrite on x costs it more than the hot part
			// takes off: the hot part goes alone.
			haveCold = false
		}
		b.offload(est, h.obj, h.part, yNode)
		remaps++
		if haveCold {
			b.offload(est, c.obj, c.part, xNode)
			remaps++
		}
		d.Swapped++
	}
}

// offloadDelta is the change to the estimate that offloading part p of o
// to node n would make (see offload).
func (e *estimate) offloadDelta(o *object, p int, n base.NodeID) []serverDelta {
	src := o.entry.Dst
	state := StateECEWO
	if src.Redundancy == REP {
		state = StateREPEWO
	}
	return e.retargetDelta(o, src, src.With(p, n), state)
}

// narrows reports whether the deltas take wear off server x and leave x and
// y closer than they were (|x' - y'| < x - y), counting every erase the
// change costs: the parts' future writes and the rewrite of each part on
// its new server. Deltas to other servers are not looked at.
func (e *estimate) narrows(x, y int, ds []serverDelta) bool {
	xv, yv := e.est[x], e.est[y]
	for _, d := range ds {
		switch d.k {
		case x:
			xv += d.v
		case y:
			yv += d.v
		}
	}
	return xv < e.est[x] && math.Abs(xv-yv) < e.est[x]-e.est[y]
}

// wornPairs hands out the (most worn, least worn) pairs of HCDS and EDM
// on the current estimate, leaving out the servers set aside. The servers
// set aside are left out of the estimate's highest until release (NB:
// call it before anything else asks the estimate for its most worn), so
// that a next after thousands of them costs O(log n), not O(aside log n).
type wornPairs struct {
	est   *estimate
	aside []int
}

func (e *estimate) wornPairs() *wornPairs {
	return &wornPairs{est: e}
}

// next returns the most worn server not set aside and the least worn other
// server that can take a part, while the first is more worn than the
// second.
func (w *wornPairs) next() (x, y int, ok bool) {
	e := w.est
	xs := e.extremes(1, true, -1, nil)
	if len(xs) == 0 {
		return 0, 0, false
	}
	x = xs[0]
	xNode := e.nodes[x]
	ys := e.extremes(1, false, 0, func(n base.NodeID) bool { return n == xNode })
	if len(ys) == 0 || e.est[x] <= e.est[ys[0]] {
		return 0, 0, false
	}
	return x, ys[0], true
}

// setAside leaves server x out of the rest of the epoch as a source.
func (w *wornPairs) setAside(x int) {
	w.aside = append(w.aside, x)
	w.est.tree.maskMax(x, true)
}

// release puts the servers set aside back into the estimate's highest.
func (w *wornPairs) release() {
	for _, x := range w.aside {
		w.est.tree.maskMax(x, false)
	}
	w.aside = nil
}

// edm is the EDM baseline: while the estimated wear variance exceeds
// sigma_HCDS and the budgets last, move the hottest part on the most worn
// server to the least worn one, copying it now, whatever its redundancy.
// Like HCDS, a most worn server with nothing to move is set aside and the
// next one is tried.
// The object passes through its EWO state while the copy runs.
func (b *Balancer) edm(d *Decisions, est *estimate) {
	hot := b.ranked(b.candidates(est), b.hotter)
	var moved int64
	remaps := 0
	pairs := est.wornPairs()
	defer pairs.release()
	for remaps < b.opts.MaxRemapsPerEpoch && est.above(b.opts.hcdsTrigger()) {
		x, y, ok := pairs.next()
		if !ok {
			return
		}
		gap := est.est[x] - est.est[y]
		r, ok := b.pick(est, hot, x, est.nodes[y], func(r relocation) bool {
			o := &b.objs[r.obj]
			bytes := o.entry.Dst.Redundancy.PartBytes(o.size)
			return r.gain > 0 && r.gain < gap && moved+bytes <= b.opts.MaxMoveBytesPerEpoch && est.room(y, bytes)
		})
		if !ok {
			pairs.setAside(x)
			continue
		}
		o := &b.objs[r.obj]
		bytes := o.entry.Dst.Redundancy.PartBytes(o.size)
		b.offload(est, r.obj, r.part, est.nodes[y])
		b.issueMove(d, o, "edm", bytes)
		moved += bytes
		remaps++
		d.Remapped++
	}
}

// movedBytes is what a move from src to dst writes: the parts that change.
func movedBytes(size int64, src, dst Layout) int64 {
	var n int64
	for p := 0; p < dst.Width(); p++ {
		if src.Redundancy == dst.Redundancy && src.Node(p) == dst.Node(p) {
			continue
		}
		n += dst.Redundancy.PartBytes(size)
	}
	return n
}

func (b *Balancer) issueMove(d *Decisions, o *object, reason string, bytes int64) {
	o.moving = true
	o.inflight++
	b.seq++
	b.outstanding[b.seq] = o.incarnation
	d.Moves = append(d.Moves, Move{
		Object: o.entry.Object, From: o.entry.Src, To: o.entry.Dst,
		Reason: reason, Bytes: bytes, id: b.seq, gen: o.gen,
	})
}

// fallback is the migration of EWO data that is never written again
// (section III-B2): an object left in an EWO state without a write for
// MigrateAfterEpochs is copied to its destination, oldest first, within
// the byte budget, once the servers it is copied to are up.
func (b *Balancer) fallback(d *Decisions) {
	var idle []int32
	for i := range b.objs {
		o := &b.objs[i]
		s := o.entry.State
		if o.moving || o.inflight > 0 || (s != StateREPEWO && s != StateECEWO) {
			continue
		}
		if b.epoch-o.since >= uint32(b.opts.MigrateAfterEpochs) && b.newPartsUp(o.entry.Src, o.entry.Dst) {
			idle = append(idle, int32(i))
		}
	}
	slices.SortFunc(idle, func(x, y int32) int {
		ox, oy := &b.objs[x], &b.objs[y]
		if ox.since != oy.since {
			return int(ox.since) - int(oy.since)
		}
		if ox.entry.Object < oy.entry.Object {
			return -1
		}
		return 1
	})
	var moved int64
	for _, i := range idle {
		o := &b.objs[i]
		bytes := movedBytes(o.size, o.entry.Src, o.entry.Dst)
		if moved+bytes > b.opts.MaxMoveBytesPerEpoch {
			break
		}
		moved += bytes
		b.issueMove(d, o, "ewo-fallback", bytes)
	}
}

// newPartsUp reports whether every server that a move from src to dst
// would write a part to is up. NB: the migration fallback waits for a
// destination that is down (the live mover's copy to it would fail, and it
// was issued again every epoch); the object stays readable on src, and its
// next write is planned around the server.
func (b *Balancer) newPartsUp(src, dst Layout) bool {
	for p := 0; p < dst.Width(); p++ {
		if src.Redundancy == dst.Redundancy && src.Node(p) == dst.Node(p) {
			continue
		}
		if !b.up(dst.Node(p)) {
			return false
		}
	}
	return true
}

// ageToEC is the REP+EC baseline: a replicated object not written for
// ColdAfterEpochs is encoded onto its default placement now (a background
// conversion, like HDFS-RAID), within the byte budget.
func (b *Balancer) ageToEC(d *Decisions) {
	var moved int64
	for i := range b.objs {
		o := &b.objs[i]
		if o.moving || o.inflight > 0 || o.entry.State != StateREP || b.epoch-o.lastWrite < uint32(b.opts.ColdAfterEpochs) {
			continue
		}
		dst, err := b.place(o.entry.Object, EC, nil)
		if err != nil {
			continue
		}
		bytes := movedBytes(o.size, o.entry.Dst, dst)
		if moved+bytes > b.opts.MaxMoveBytesPerEpoch {
			return
		}
		moved += bytes
		b.change(o, Entry{Object: o.entry.Object, State: StateLateEC, Src: o.entry.Dst, Dst: dst, Epoch: b.epoch})
		d.LateEC++
		b.issueMove(d, o, "rep+ec", bytes)
	}
}
