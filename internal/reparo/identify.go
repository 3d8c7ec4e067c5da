package reparo

import "fmt"

// Method is how the lost logical ranges of a failed die are identified.
type Method int

const (
	// IdentifyCDRStar reads the block-level P2L page entrusted to the neighbouring
	// die, one page per block of the failed die (section 6.2).
	IdentifyCDRStar Method = iota
	// CDR splits the logical-to-physical map among one worker per channel
	// (section 5.1).
	IdentifyCDR
	// IDR scans the whole map with one worker, the victim's (section 4.2.2).
	IdentifyIDR
)

// Methods lists every identifier method.
var Methods = []Method{IdentifyIDR, IdentifyCDR, IdentifyCDRStar}

func (m Method) String() string {
	switch m {
	case IdentifyCDRStar:
		return "cdr*"
	case IdentifyCDR:
		return "cdr"
	case IdentifyIDR:
		return "idr"
	}
	return fmt.Sprintf("method(%d)", int(m))
}

// ParseMethod parses "idr", "cdr" or "cdr*".
func ParseMethod(s string) (Method, error) {
	for _, m := range Methods {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("reparo: unknown identifier %q (want idr, cdr or cdr*)", s)
}

// Window is a bounded query of the logical space: the files whose IDs are
// in [From, To) (To 0: no upper bound). The host asks window after window
// (Reparo's get_lba_status over a limited LBA range, section 4.2), so no
// single call walks the whole map.
type Window struct {
	From, To uint64
}

// Contains reports whether the file ID is in the window.
func (w Window) Contains(id uint64) bool { return id >= w.From && (w.To == 0 || id < w.To) }

// All is the window over the whole logical space.
var All = Window{}

// Windows cuts [0, maxID] into windows of at most span file IDs.
func Windows(maxID, span uint64) []Window {
	if span == 0 {
		span = 1
	}
	var out []Window
	for from := uint64(0); from <= maxID; from += span {
		out = append(out, Window{From: from, To: from + span})
		if from+span < from { // overflow
			break
		}
	}
	return out
}

// Partition splits n entries among workers: part w gets entries
// [bounds[w], bounds[w+1]). Parts differ in size by at most one.
func Partition(n, workers int) []int {
	if workers < 1 {
		workers = 1
	}
	bounds := make([]int, workers+1)
	for w := 0; w <= workers; w++ {
		bounds[w] = n * w / workers
	}
	return bounds
}
