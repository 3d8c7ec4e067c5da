package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// Request is one client request of a trace: bytes [Offset, Offset+Length)
// of the workload's address space, at virtual time At since its start.
type Request struct {
	At     time.Duration
	Offset int64
	Length int64
	Write  bool
	// Continued marks a further piece of the request before it (a source
	// that cuts requests at object boundaries); it is not counted again.
	Continued bool
}

// Source yields a workload's requests in time order.
type Source interface {
	// Next returns the next request; ok is false at the end.
	Next() (r Request, ok bool, err error)
}

// Workload describes a trace: its address space, its expected size and how
// to produce its requests.
type Workload struct {
	Name string
	// Dataset is the bytes of address space the trace uses: objects are
	// its ObjectBytes-sized pieces, preloaded before the trace when Preload.
	Dataset int64
	// ObjectBytes is the object size (the address space is cut into objects
	// of this size); at most MaxPartPages pages.
	ObjectBytes int64
	// Requests is the expected request count (for progress).
	Requests int64
	// Duration is the trace's span in virtual time.
	Duration time.Duration
	// Preload writes every object once before the trace (the data set
	// exists when the trace starts; not counted in the results).
	Preload bool
	// Open returns a fresh source of the requests, seeded.
	Open func(seed int64) (Source, error)
}

// Profile is a synthetic workload matching a trace's characteristics
// (paper 004 Table III): request count, data set, bytes requested (reads
// and writes) and write ratio, over a Zipf-skewed choice of objects.
type Profile struct {
	Name        string
	Requests    int64
	Dataset     int64 // bytes
	ReqBytes    int64 // bytes read and written by all requests
	WriteRatio  float64
	Theta       float64 // Zipf exponent of object popularity
	ObjectBytes int64
	Duration    time.Duration
	// WholeObject: every request reads or writes one whole object (YCSB:
	// a record is an object).
	WholeObject bool
}

// Table III of paper 004. The skew (Theta) of the MSR-Cambridge traces is
// not in the paper: we chose it (NB: an assumption, not a measurement of
// those traces); YCSB's is its default, 0.99. A YCSB record is one object
// of the mean request size (55 GB / 1.2M requests, rounded to 12 pages);
// MSR objects are 128 KiB pieces of the volume, requests land page-aligned
// inside them with a geometric size of the trace's mean. YCSB spans the
// paper's 85 hours (Figure 8), the MSR traces their week.
var tableIII = []Profile{
	{Name: "ycsb-zipf", Requests: 1_200_000, Dataset: 10_400 << 20, ReqBytes: 55_000 << 20, WriteRatio: 0.811,
		Theta: 0.99, ObjectBytes: 48 << 10, Duration: 85 * time.Hour, WholeObject: true},
	{Name: "mds-0", Requests: 1_300_000, Dataset: 3_100 << 20, ReqBytes: 44_000 << 20, WriteRatio: 0.932,
		Theta: 1.1, ObjectBytes: 128 << 10, Duration: 168 * time.Hour},
	{Name: "web-1", Requests: 1_300_000, Dataset: 3_800 << 20, ReqBytes: 18_000 << 20, WriteRatio: 0.769,
		Theta: 0.9, ObjectBytes: 128 << 10, Duration: 168 * time.Hour},
	{Name: "usr-0", Requests: 2_200_000, Dataset: 2_500 << 20, ReqBytes: 194_000 << 20, WriteRatio: 0.836,
		Theta: 1.0, ObjectBytes: 128 << 10, Duration: 168 * time.Hour},
	{Name: "hm-0", Requests: 4_000_000, Dataset: 1_900 << 20, ReqBytes: 135_000 << 20, WriteRatio: 0.866,
		Theta: 1.05, ObjectBytes: 128 << 10, Duration: 168 * time.Hour},
}

// Profiles returns Table III's five workloads.
func Profiles() []Profile { return append([]Profile(nil), tableIII...) }

// LookupProfile returns a Table III profile by name.
func LookupProfile(name string) (Profile, error) {
	var names []string
	for _, p := range tableIII {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Profile{}, base.InvalidArgumentf("sim: unknown workload %q (have %s, or msr:FILE.csv)", name, strings.Join(names, ", "))
}

// Scaled returns the profile with its request count and data set (and so
// its bytes requested) multiplied by f; object size, write ratio, skew and
// duration stay.
func (p Profile) Scaled(f float64) Profile {
	p.Requests = max(1, int64(float64(p.Requests)*f))
	p.Dataset = max(p.ObjectBytes, int64(float64(p.Dataset)*f))
	p.ReqBytes = max(1, int64(float64(p.ReqBytes)*f))
	return p
}

// Workload turns the profile into a workload.
func (p Profile) Workload() (Workload, error) {
	if p.Requests < 1 || p.Dataset < p.ObjectBytes || p.ObjectBytes < DefaultPageBytes ||
		p.ObjectBytes > MaxPartPages*DefaultPageBytes || p.ObjectBytes%DefaultPageBytes != 0 ||
		!(p.WriteRatio >= 0 && p.WriteRatio <= 1) || !(p.Theta > 0) || p.Duration <= 0 {
		return Workload{}, base.InvalidArgumentf("sim: bad profile %+v", p)
	}
	return Workload{
		Name: p.Name, Dataset: p.Dataset / p.ObjectBytes * p.ObjectBytes, ObjectBytes: p.ObjectBytes,
		Requests: p.Requests, Duration: p.Duration, Preload: true,
		Open: func(seed int64) (Source, error) { return newProfileSource(p, seed), nil },
	}, nil
}

// zipf draws ranks 0..n-1 with P(rank i) proportional to 1/(i+1)^theta,
// exactly, by inverting the cumulative distribution (a table of n floats
// and a binary search per draw).
type zipf struct{ cdf []float64 }

func newZipf(n int64, theta float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	sum := 0.0
	for i := range z.cdf {
		sum += math.Pow(float64(i+1), -theta)
		z.cdf[i] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

func (z *zipf) next(rng *rand.Rand) int64 {
	u := rng.Float64()
	i := sort.SearchFloat64s(z.cdf, u)
	return int64(min(i, len(z.cdf)-1))
}

// probability is P(rank i).
func (z *zipf) probability(i int) float64 {
	if i == 0 {
		return z.cdf[0]
	}
	return z.cdf[i] - z.cdf[i-1]
}

// maxRequestPages bounds a synthetic block request (4 MiB).
const maxRequestPages = 1024

// profileSource generates a profile's requests: exponential gaps with the
// mean that spreads them over the duration, Zipf ranks mapped to objects
// through a seeded permutation (hot objects are scattered over the address
// space, as YCSB's scrambled generator does), writes with the profile's
// ratio.
type profileSource struct {
	p       Profile
	rng     *rand.Rand
	z       *zipf
	perm    []int32
	i       int64
	at      float64 // ns
	gapNs   float64
	meanPgs float64
	objPgs  int64
}

func newProfileSource(p Profile, seed int64) *profileSource {
	rng := rand.New(rand.NewSource(seed))
	objects := p.Dataset / p.ObjectBytes
	perm := make([]int32, objects)
	for i := range perm {
		perm[i] = int32(i)
	}
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	s := &profileSource{
		p: p, rng: rng, z: newZipf(objects, p.Theta), perm: perm,
		gapNs:  float64(p.Duration) / float64(p.Requests),
		objPgs: p.ObjectBytes / DefaultPageBytes,
	}
	s.meanPgs = float64(p.ReqBytes) / float64(p.Requests) / DefaultPageBytes
	return s
}

func (s *profileSource) Next() (Request, bool, error) {
	if s.i >= s.p.Requests {
		return Request{}, false, nil
	}
	s.i++
	s.at += s.rng.ExpFloat64() * s.gapNs
	obj := int64(s.perm[s.z.next(s.rng)])
	r := Request{At: time.Duration(s.at), Write: s.rng.Float64() < s.p.WriteRatio}
	if s.p.WholeObject {
		r.Offset, r.Length = obj*s.p.ObjectBytes, s.p.ObjectBytes
		return r, true, nil
	}
	// A geometric size in pages with the trace's mean (at least one page,
	// at most maxRequestPages) from a uniform page of the object; a large
	// request runs on into the next objects, as block requests do, and
	// stops at the end of the data set.
	pages := int64(1)
	if s.meanPgs > 1 {
		pages = 1 + int64(math.Floor(math.Log(1-s.rng.Float64())/math.Log(1-1/s.meanPgs)))
	}
	pages = min(max(pages, 1), maxRequestPages)
	start := s.rng.Int63n(s.objPgs)
	r.Offset = obj*s.p.ObjectBytes + start*DefaultPageBytes
	r.Length = min(pages*DefaultPageBytes, s.p.Dataset/s.p.ObjectBytes*s.p.ObjectBytes-r.Offset)
	return r, true, nil
}

// MSR-Cambridge block traces (SNIA IOTTA, Narayanan et al.) are CSV lines
//
//	Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//
// with the timestamp in Windows filetime ticks (100 ns), Type "Read" or
// "Write", offset and size in bytes.

// MSRInfo is what a first pass over a trace file learns.
type MSRInfo struct {
	Requests   int64
	Writes     int64
	Objects    int64 // distinct objects touched
	Bytes      int64 // bytes requested
	Duration   time.Duration
	MaxAddress int64 // highest byte touched + 1
}

type msrLine struct {
	ticks  int64
	write  bool
	offset int64
	size   int64
}

func parseMSRLine(line string, n int) (msrLine, error) {
	f := strings.Split(strings.TrimSpace(line), ",")
	if len(f) < 6 {
		return msrLine{}, base.InvalidArgumentf("sim: MSR trace line %d has %d fields (want Timestamp,Hostname,DiskNumber,Type,Offset,Size[,ResponseTime])", n, len(f))
	}
	var l msrLine
	var err error
	if l.ticks, err = strconv.ParseInt(f[0], 10, 64); err != nil || l.ticks < 0 {
		return msrLine{}, base.InvalidArgumentf("sim: MSR trace line %d: timestamp %q", n, f[0])
	}
	switch strings.ToLower(f[3]) {
	case "write":
		l.write = true
	case "read":
	default:
		return msrLine{}, base.InvalidArgumentf("sim: MSR trace line %d: type %q (want Read or Write)", n, f[3])
	}
	if l.offset, err = strconv.ParseInt(f[4], 10, 64); err != nil || l.offset < 0 {
		return msrLine{}, base.InvalidArgumentf("sim: MSR trace line %d: offset %q", n, f[4])
	}
	if l.size, err = strconv.ParseInt(f[5], 10, 64); err != nil || l.size <= 0 || l.size > 1<<30 {
		return msrLine{}, base.InvalidArgumentf("sim: MSR trace line %d: size %q", n, f[5])
	}
	return l, nil
}

// msrSource reads a trace file once.
type msrSource struct {
	f     *os.File
	s     *bufio.Scanner
	n     int
	t0    int64
	begun bool
	prev  int64
}

func (m *msrSource) Next() (Request, bool, error) {
	for m.s.Scan() {
		m.n++
		line := m.s.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		l, err := parseMSRLine(line, m.n)
		if err != nil {
			return Request{}, false, err
		}
		if !m.begun {
			m.t0, m.begun = l.ticks, true
		}
		if l.ticks < m.prev {
			return Request{}, false, base.InvalidArgumentf("sim: MSR trace line %d goes back in time", m.n)
		}
		m.prev = l.ticks
		return Request{At: time.Duration(l.ticks-m.t0) * 100, Offset: l.offset, Length: l.size, Write: l.write}, true, nil
	}
	if err := m.s.Err(); err != nil {
		return Request{}, false, fmt.Errorf("sim: reading MSR trace: %w", err)
	}
	m.f.Close()
	return Request{}, false, nil
}

func openMSR(path string) (*msrSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	return &msrSource{f: f, s: s}, nil
}

// ScanMSR reads a trace file once to learn its size: requests, objects of
// objectBytes touched, bytes and duration.
func ScanMSR(path string, objectBytes int64) (MSRInfo, error) {
	src, err := openMSR(path)
	if err != nil {
		return MSRInfo{}, err
	}
	defer src.f.Close()
	var info MSRInfo
	seen := map[int64]struct{}{}
	for {
		r, ok, err := src.Next()
		if err != nil {
			return MSRInfo{}, err
		}
		if !ok {
			break
		}
		info.Requests++
		if r.Write {
			info.Writes++
		}
		info.Bytes += r.Length
		info.Duration = r.At
		info.MaxAddress = max(info.MaxAddress, r.Offset+r.Length)
		for o := r.Offset / objectBytes; o <= (r.Offset+r.Length-1)/objectBytes; o++ {
			seen[o] = struct{}{}
		}
	}
	info.Objects = int64(len(seen))
	return info, nil
}

// MSRWorkload replays an MSR-Cambridge trace file. Objects are created by
// their first write (no preload: what the trace never writes is not
// stored), and object IDs are dense indices in order of first touch.
func MSRWorkload(path string, objectBytes int64) (Workload, error) {
	if objectBytes < DefaultPageBytes || objectBytes > MaxPartPages*DefaultPageBytes || objectBytes%DefaultPageBytes != 0 {
		return Workload{}, base.InvalidArgumentf("sim: object of %d bytes", objectBytes)
	}
	info, err := ScanMSR(path, objectBytes)
	if err != nil {
		return Workload{}, err
	}
	if info.Requests == 0 {
		return Workload{}, base.InvalidArgumentf("sim: MSR trace %s has no requests", path)
	}
	return Workload{
		Name: "msr:" + path, Dataset: info.Objects * objectBytes, ObjectBytes: objectBytes,
		Requests: info.Requests, Duration: info.Duration + time.Nanosecond,
		Open: func(int64) (Source, error) { return newDenseSource(path, objectBytes) },
	}, nil
}

// denseSource renumbers a trace's objects densely in order of first touch,
// so that a volume of terabytes with a few gigabytes in use maps onto as
// many objects as it touches.
type denseSource struct {
	src    *msrSource
	ids    map[int64]int64
	queue  []Request
	objLen int64
}

func newDenseSource(path string, objectBytes int64) (*denseSource, error) {
	src, err := openMSR(path)
	if err != nil {
		return nil, err
	}
	return &denseSource{src: src, ids: map[int64]int64{}, objLen: objectBytes}, nil
}

func (d *denseSource) Next() (Request, bool, error) {
	if len(d.queue) == 0 {
		r, ok, err := d.src.Next()
		if err != nil || !ok {
			return r, ok, err
		}
		// Cut at object boundaries and renumber each piece's object.
		for off, end := r.Offset, r.Offset+r.Length; off < end; {
			o := off / d.objLen
			pieceEnd := min(end, (o+1)*d.objLen)
			id, ok := d.ids[o]
			if !ok {
				id = int64(len(d.ids))
				d.ids[o] = id
			}
			d.queue = append(d.queue, Request{At: r.At, Offset: id*d.objLen + off%d.objLen, Length: pieceEnd - off,
				Write: r.Write, Continued: off != r.Offset})
			off = pieceEnd
		}
	}
	r := d.queue[0]
	d.queue = d.queue[1:]
	return r, true, nil
}

// WriteMSR writes requests as an MSR-Cambridge CSV trace (host "sim", disk
// 0, response time 0) starting at filetime tick t0.
func WriteMSR(w io.Writer, t0 int64, reqs []Request) error {
	bw := bufio.NewWriter(w)
	for _, r := range reqs {
		kind := "Read"
		if r.Write {
			kind = "Write"
		}
		if _, err := fmt.Fprintf(bw, "%d,sim,0,%s,%d,%d,0\n", t0+int64(r.At/100), kind, r.Offset, r.Length); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ProfileNames lists Table III's workload names.
func ProfileNames() []string {
	var out []string
	for _, p := range tableIII {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}
