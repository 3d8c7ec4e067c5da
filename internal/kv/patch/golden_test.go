package patch

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/gen/kvpb"
	"github.com/flashmend/flashmend/internal/golden"
	"github.com/flashmend/flashmend/internal/kv/keyspan"
)

// TestTrackerGolden runs the script testdata/tracker.txt against one
// Tracker (internal/golden: each command line is followed by its output,
// regenerated with -update after a deliberate change).
//
// Ranges are written a-c ([a, c)) or a- ([a, +inf)); times are seconds.
//
//	admit PATH T NARROW[:WIDE][#B1,B2]...  Admit spans of PATH detected at T
//	add ID                               Add the last admitted request as ID
//	due T                                Due at T (resend 9s), proposal ids 100, 101...
//	drop PROPOSAL                        Dropped
//	deliver ID FROM PIECE,... [K=V,...]  Deliver (a patch of 10 bytes)
//	received ID                          Received
//	assemble ID                          Assemble the request's own ranges
//	refused RANGE                        Refused
//	hold RANGE,... / release RANGE,... [KEEP,...]
//	settle ID DONE,... MERGED,...        Settle (- for none; done blocks: the request's)
//	retry ID T [MERGED,...]              Retry of the ranges of ID missing and not merged, not before T
//	block PATH OFFSET                    BlockRepaired
//	busy PATH                            Busy
//	reset                                Reset
//	state                                refused ranges and pending requests
func TestTrackerGolden(t *testing.T) {
	h := &harness{t: t, nextID: 100}
	golden.Script(t, "testdata/tracker.txt", h.run)
}

type harness struct {
	t      *testing.T
	tr     Tracker
	last   *Request
	nextID uint64
}

var epoch = time.Unix(1_700_000_000, 0)

func at(t *testing.T, s string) time.Time {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return epoch.Add(time.Duration(n) * time.Second)
}

// parseRange reads a-c or a- (keys may hold Go escapes: b\x00).
func parseRange(t *testing.T, s string) keyspan.Range {
	start, end, ok := strings.Cut(s, "-")
	if !ok {
		t.Fatalf("range %q: want a-c or a-", s)
	}
	return keyspan.Range{Start: unquote(t, start), End: unquote(t, end)}
}

func unquote(t *testing.T, s string) []byte {
	u, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		t.Fatalf("key %q: %v", s, err)
	}
	return []byte(u)
}

func parseRanges(t *testing.T, s string) []keyspan.Range {
	if s == "-" || s == "" {
		return nil
	}
	var out []keyspan.Range
	for _, f := range strings.Split(s, ",") {
		out = append(out, parseRange(t, f))
	}
	return out
}

func parseSpan(t *testing.T, s string) Span {
	s, blocks, _ := strings.Cut(s, "#")
	narrow, wide, hasWide := strings.Cut(s, ":")
	sp := Span{Narrow: parseRange(t, narrow)}
	sp.Wide = sp.Narrow
	if hasWide {
		sp.Wide = parseRange(t, wide)
	}
	if blocks != "" {
		for _, f := range strings.Split(blocks, ",") {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("block %q: %v", f, err)
			}
			sp.Blocks = append(sp.Blocks, n)
		}
	}
	return sp
}

func parseID(t *testing.T, s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return n
}

func rows(rs []*kvpb.KeyValue) string {
	var parts []string
	for _, kv := range rs {
		parts = append(parts, strconv.Quote(string(kv.Key))+"="+string(kv.Value))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func (q *Request) describe() string {
	s := fmt.Sprintf("%s ranges=%v wide=%v blocks=%v detected=%ds", q.Path, q.Ranges, q.Wide, q.Blocks, int(q.Detected.Sub(epoch)/time.Second))
	if !q.RetryAfter.IsZero() {
		s += fmt.Sprintf(" retryAfter=%ds", int(q.RetryAfter.Sub(epoch)/time.Second))
	}
	if q.Retries > 0 {
		s += fmt.Sprintf(" retries=%d", q.Retries)
	}
	return s
}

func (h *harness) run(line string) []string {
	t := h.t
	f := strings.Fields(line)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "admit":
		var spans []Span
		for _, s := range f[3:] {
			spans = append(spans, parseSpan(t, s))
		}
		q, kept := h.tr.Admit(f[1], at(t, f[2]), spans)
		h.last = q
		if q == nil {
			return []string{"nothing to repair"}
		}
		return []string{fmt.Sprintf("request %s kept=%v", q.describe(), kept)}
	case "add":
		h.tr.Add(parseID(t, f[1]), h.last)
		return nil
	case "due":
		leader := uint64(1)
		if arg(2) != "" {
			leader = parseID(t, arg(2))
		}
		var out []string
		for _, p := range h.tr.Due(at(t, f[1]), leader, 4*time.Second, 9*time.Second, func() uint64 { h.nextID++; return h.nextID - 1 }) {
			out = append(out, fmt.Sprintf("propose %d: patch %d %v", p.ProposalID, p.PatchID, p.Ranges))
		}
		if len(out) == 0 {
			out = []string{"nothing due"}
		}
		return out
	case "drop":
		h.tr.Dropped(parseID(t, f[1]))
		return nil
	case "commit":
		return []string{fmt.Sprintf("waited=%v uncommitted=%v", h.tr.Committed(parseID(t, f[1]), epoch), h.tr.Uncommitted())}
	case "deliver":
		var kvs []*kvpb.KeyValue
		if arg(4) != "" {
			for _, kv := range strings.Split(arg(4), ",") {
				k, v, _ := strings.Cut(kv, "=")
				kvs = append(kvs, &kvpb.KeyValue{Key: unquote(t, k), Value: []byte(v)})
			}
		}
		changed := h.tr.Deliver(parseID(t, f[1]), parseID(t, f[2]), parseRanges(t, f[3]), kvs, 10)
		return []string{fmt.Sprintf("changed=%v", changed)}
	case "received":
		got, answered := h.tr.Received(parseID(t, f[1]))
		out := []string{fmt.Sprintf("answered=%d bytes=%d", answered, got.Bytes)}
		var keys []string
		for k := range got.Pieces {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s: pieces=%v rows=%s", k, got.Pieces[k], rows(got.Rows[k])))
		}
		return out
	case "assemble":
		id := parseID(t, f[1])
		q, ok := h.tr.Waiting(id)
		if !ok {
			return []string{"not waiting"}
		}
		got, _ := h.tr.Received(id)
		covered, missing := Assemble(q, q.Ranges, got)
		var out []string
		for _, p := range covered {
			out = append(out, fmt.Sprintf("covered %v wide=%v blocks=%v rows=%s", p.Range, p.Wide, p.Blocks, rows(p.Rows)))
		}
		for _, p := range missing {
			out = append(out, fmt.Sprintf("missing %v wide=%v blocks=%v", p.Range, p.Wide, p.Blocks))
		}
		return out
	case "refused":
		if rec, ok := h.tr.Refused(parseRange(t, f[1])); ok {
			return []string{fmt.Sprintf("refused: %v under repair", rec)}
		}
		return []string{"readable"}
	case "hold":
		h.tr.Hold(parseRanges(t, f[1]))
		return nil
	case "release":
		h.tr.Release(parseRanges(t, f[1]), parseRanges(t, arg(2)))
		return nil
	case "settle":
		id := parseID(t, f[1])
		q, ok := h.tr.Waiting(id)
		if !ok {
			return []string{"not waiting"}
		}
		done := parseRanges(t, f[2])
		var blocks []uint64
		for i, rg := range q.Ranges {
			if keyspan.Has(done, rg) && i < len(q.Blocks) {
				blocks = append(blocks, q.Blocks[i]...)
			}
		}
		clear := h.tr.Settle(id, q.Path, done, parseRanges(t, arg(3)), blocks)
		return []string{fmt.Sprintf("nothing refused=%v", clear)}
	case "retry":
		id := parseID(t, f[1])
		q, ok := h.tr.Waiting(id)
		if !ok {
			return []string{"not waiting"}
		}
		got, _ := h.tr.Received(id)
		_, missing := Assemble(q, q.Ranges, got)
		merged := parseRanges(t, arg(3))
		var still []Piece
		for _, p := range missing {
			if !keyspan.Has(merged, p.Range) {
				still = append(still, p)
			}
		}
		h.last = Retry(q, still, at(t, f[2]), time.Second, 3*time.Second)
		if h.last == nil {
			return []string{"nothing to retry"}
		}
		return []string{"request " + h.last.describe()}
	case "block":
		return []string{fmt.Sprintf("repaired=%v", h.tr.BlockRepaired(f[1], parseID(t, f[2])))}
	case "busy":
		return []string{fmt.Sprintf("busy=%v", h.tr.Busy(f[1]))}
	case "reset":
		h.tr.Reset()
		return nil
	case "state":
		out := []string{fmt.Sprintf("refused=%v", h.tr.Recovering())}
		var ids []uint64
		for id := range h.tr.pending {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			out = append(out, fmt.Sprintf("pending %d: %s", id, h.tr.pending[id].describe()))
		}
		return out
	}
	t.Fatalf("unknown command %q", line)
	return nil
}

// TestRetryBacksOff: a request whose ranges no peer could send asks again
// after first, doubling with each retry, never later than last.
func TestRetryBacksOff(t *testing.T) {
	q := &Request{Path: "000001.sst", Detected: epoch}
	missing := []Piece{{Range: keyspan.Range{Start: []byte("a"), End: []byte("b")}}}
	var waits []time.Duration
	for i := 0; i < 7; i++ {
		q = Retry(q, missing, epoch, 100*time.Millisecond, 3*time.Second)
		waits = append(waits, q.RetryAfter.Sub(epoch))
		if !q.Detected.Equal(epoch) || q.Retries != i+1 {
			t.Fatalf("retry %d: detected %v, retries %d", i, q.Detected, q.Retries)
		}
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3000, 3000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if Retry(q, nil, epoch, time.Second, time.Second) != nil {
		t.Fatal("a retry with nothing missing")
	}
}
