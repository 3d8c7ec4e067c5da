package wear

import (
	"fmt"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
)

// ObjectID names an object to the balancer. The coordinator uses the key's
// FNV-1a hash (hashring.KeyHash); the simulator uses the object's index.
type ObjectID uint64

func (o ObjectID) String() string { return fmt.Sprintf("o%d", uint64(o)) }

// Redundancy is how an object version is stored: REP (3 copies) or EC
// (Reed-Solomon 4+2), as in paper 004 section IV-A.
type Redundancy uint8

const (
	// REP keeps RepCopies identical copies on distinct servers.
	REP Redundancy = iota + 1
	// EC keeps ECData data shards and ECParity parity shards on distinct
	// servers; any ECData of them rebuild the object.
	EC
)

// Widths of the two layouts.
const (
	RepCopies = 3
	ECData    = 4
	ECParity  = 2
	// MaxWidth is the widest layout (EC: 6 shards).
	MaxWidth = ECData + ECParity
)

// Width is the number of parts (copies or shards) on distinct servers.
func (r Redundancy) Width() int {
	switch r {
	case REP:
		return RepCopies
	case EC:
		return MaxWidth
	}
	return 0
}

// PartShare is the fraction of an object's bytes that one part holds: a
// copy holds all of it, a shard a quarter.
func (r Redundancy) PartShare() float64 {
	if r == EC {
		return 1.0 / ECData
	}
	return 1
}

// PartBytes is the size of one part of an object of size bytes.
func (r Redundancy) PartBytes(size int64) int64 {
	if r == EC {
		return (size + ECData - 1) / ECData
	}
	return size
}

func (r Redundancy) String() string {
	switch r {
	case REP:
		return "REP"
	case EC:
		return "EC"
	}
	return fmt.Sprintf("redundancy(%d)", uint8(r))
}

// ParseRedundancy reads "rep" or "ec" (any case).
func ParseRedundancy(s string) (Redundancy, error) {
	switch strings.ToLower(s) {
	case "rep":
		return REP, nil
	case "ec":
		return EC, nil
	}
	return 0, base.InvalidArgumentf("wear: redundancy %q (want rep or ec)", s)
}

// State is an object's state in the mapping table (paper 004 Figure 2(b)):
// two redundancy states and four intermediate ones. An object in an
// intermediate state is readable from its source layout and moves to its
// destination layout on its next write (or, for EWO states left without a
// write, by migration).
type State uint8

const (
	// StateREP: replicated on its destination layout.
	StateREP State = iota + 1
	// StateEC: erasure coded on its destination layout.
	StateEC
	// StateLateREP: hot, held as EC on the source; the next write replicates
	// it onto the destination (upgrade deferred to the next write).
	StateLateREP
	// StateLateEC: cold, held as REP on the source; the next write encodes
	// it onto the destination (downgrade deferred to the next write).
	StateLateEC
	// StateREPEWO: replicated, swapped by HCDS: the next write is offloaded
	// to the destination copies (endurance-aware write offloading).
	StateREPEWO
	// StateECEWO: erasure coded, swapped by HCDS, as StateREPEWO.
	StateECEWO
	numStates
)

// States lists every state, in order.
func States() []State {
	return []State{StateREP, StateEC, StateLateREP, StateLateEC, StateREPEWO, StateECEWO}
}

func (s State) String() string {
	switch s {
	case StateREP:
		return "REP"
	case StateEC:
		return "EC"
	case StateLateREP:
		return "late-REP"
	case StateLateEC:
		return "late-EC"
	case StateREPEWO:
		return "REP-EWO"
	case StateECEWO:
		return "EC-EWO"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool { return s >= StateREP && s < numStates }

// Intermediate reports whether the object waits for its next write (or a
// migration) to reach its destination layout.
func (s State) Intermediate() bool { return s >= StateLateREP && s < numStates }

// Target is the redundancy of the destination layout.
func (s State) Target() Redundancy {
	switch s {
	case StateREP, StateLateREP, StateREPEWO:
		return REP
	}
	return EC
}

// Source is the redundancy of the source layout of an intermediate state
// (and the redundancy of a redundancy state).
func (s State) Source() Redundancy {
	switch s {
	case StateREP, StateLateEC, StateREPEWO:
		return REP
	}
	return EC
}

// Stable is the redundancy state that holds r.
func Stable(r Redundancy) State {
	if r == REP {
		return StateREP
	}
	return StateEC
}

// Layout is where the parts of one object version are: a redundancy and
// Width() distinct servers; part i (copy i, or shard i with data shards
// first) is on Node(i). The zero Layout is "nowhere".
type Layout struct {
	Redundancy Redundancy
	nodes      [MaxWidth]base.NodeID
}

// NewLayout checks that nodes are r.Width() distinct non-zero servers.
func NewLayout(r Redundancy, nodes []base.NodeID) (Layout, error) {
	l := Layout{Redundancy: r}
	if r.Width() == 0 {
		return Layout{}, base.InvalidArgumentf("wear: layout of redundancy %v", r)
	}
	if len(nodes) != r.Width() {
		return Layout{}, base.InvalidArgumentf("wear: %v layout of %d nodes (want %d)", r, len(nodes), r.Width())
	}
	copy(l.nodes[:], nodes)
	if err := l.Check(); err != nil {
		return Layout{}, err
	}
	return l, nil
}

// MustLayout is NewLayout for literals in tests and tables; it panics on a
// bad layout.
func MustLayout(r Redundancy, nodes ...base.NodeID) Layout {
	l, err := NewLayout(r, nodes)
	if err != nil {
		panic(err)
	}
	return l
}

// IsZero reports whether l is the zero layout.
func (l Layout) IsZero() bool { return l.Redundancy == 0 }

// Width is the number of parts.
func (l Layout) Width() int { return l.Redundancy.Width() }

// Node is the server of part i.
func (l Layout) Node(i int) base.NodeID { return l.nodes[i] }

// Nodes returns the servers of the parts, in part order.
func (l Layout) Nodes() []base.NodeID { return append([]base.NodeID(nil), l.nodes[:l.Width()]...) }

// Contains reports whether n holds a part.
func (l Layout) Contains(n base.NodeID) bool { return l.Index(n) >= 0 }

// Index is the part that n holds, or -1.
func (l Layout) Index(n base.NodeID) int {
	for i := 0; i < l.Width(); i++ {
		if l.nodes[i] == n {
			return i
		}
	}
	return -1
}

// With returns l with part i moved to n.
func (l Layout) With(i int, n base.NodeID) Layout {
	l.nodes[i] = n
	return l
}

// Check verifies that the layout is complete: a known redundancy and that
// many distinct non-zero servers, nothing past them.
func (l Layout) Check() error {
	w := l.Width()
	if w == 0 {
		return base.AssertionFailedf("wear: layout has no redundancy")
	}
	for i := 0; i < MaxWidth; i++ {
		n := l.nodes[i]
		if i >= w {
			if n != 0 {
				return base.AssertionFailedf("wear: %v layout has node %v past its width", l.Redundancy, n)
			}
			continue
		}
		if n == 0 {
			return base.AssertionFailedf("wear: %v layout has no node for part %d", l.Redundancy, i)
		}
		for j := 0; j < i; j++ {
			if l.nodes[j] == n {
				return base.AssertionFailedf("wear: %v layout has %v twice", l.Redundancy, n)
			}
		}
	}
	return nil
}

// Equal reports whether two layouts put the same parts on the same servers.
func (l Layout) Equal(o Layout) bool { return l == o }

func (l Layout) String() string {
	if l.IsZero() {
		return "-"
	}
	var b strings.Builder
	b.WriteString(l.Redundancy.String())
	b.WriteString("[")
	for i := 0; i < l.Width(); i++ {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(l.nodes[i].String())
	}
	b.WriteString("]")
	return b.String()
}

// Mode is the cluster's wear policy: the paper's four baselines and
// Chameleon (Table IV).
type Mode uint8

const (
	// ModeREP replicates everything and never balances.
	ModeREP Mode = iota + 1
	// ModeEC erasure codes everything and never balances.
	ModeEC
	// ModeREPEC replicates what is written and erasure codes what has not
	// been written for Options.ColdAfterEpochs epochs (age-based, like
	// HDFS-RAID), without wear balancing.
	ModeREPEC
	// ModeEDM keeps Options.Initial redundancy and migrates parts from the
	// most to the least worn servers (EDM, IPDPS'14), ignoring redundancy.
	ModeEDM
	// ModeChameleon runs ARPT, HCDS, EWO and the migration fallback.
	ModeChameleon
)

// Modes lists every mode, in the order of the paper's figures.
func Modes() []Mode { return []Mode{ModeREP, ModeEC, ModeREPEC, ModeEDM, ModeChameleon} }

func (m Mode) String() string {
	switch m {
	case ModeREP:
		return "rep"
	case ModeEC:
		return "ec"
	case ModeREPEC:
		return "rep+ec"
	case ModeEDM:
		return "edm"
	case ModeChameleon:
		return "chameleon"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode reads a mode name as String prints it.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, base.InvalidArgumentf("wear: policy %q (want rep, ec, rep+ec, edm or chameleon)", s)
}
