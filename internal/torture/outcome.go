package torture

import (
	"strings"

	"github.com/flashmend/flashmend/internal/experiments"
)

// Outcome is a cell's CORDS outcome.
type Outcome string

const (
	Correct     Outcome = "correct"
	Repaired    Outcome = "repaired"
	Recovered   Outcome = "unavailable-then-recovered"
	Lost        Outcome = "lost"
	Wrong       Outcome = "wrong"
	Crash       Outcome = "crash"
	Unavailable Outcome = "unavailable" // did not start, or a replica never came back in step
	NotReached  Outcome = "not reached" // the fault did not land (nothing to damage, never read or written)
	NotRun      Outcome = "not run"     // the fault is not injected into this kind of store yet
	// NotApplicable: the fault cannot occur in this file kind (what
	// happened says why: e.g. no write of the kind passes any layer the
	// harness can fail, or the file holds no byte and is never read).
	NotApplicable Outcome = "n/a"
)

// notApplicable starts the What of a cell whose fault cannot occur.
const notApplicable = "not applicable"

// Bad reports whether o misses the harness's target (0 lost, 0 wrong, 0
// crash, availability back after at most one restart).
func (o Outcome) Bad() bool { return o == Lost || o == Wrong || o == Crash || o == Unavailable }

// ClassifyKV maps a measured KV cell to its outcome and a one-line reason.
func ClassifyKV(c experiments.KVSweepCell, ioFault bool) (Outcome, string) {
	switch {
	case c.Wrong > 0:
		return Wrong, c.What
	case c.StartErr != "":
		return Unavailable, "does not start: " + c.StartErr
	case c.Missing > 0 || c.Errors > 0:
		return Lost, c.What
	case strings.HasPrefix(c.What, notApplicable):
		return NotApplicable, c.What
	case !c.Converged:
		return Unavailable, "replica n1 not back in step with its peers: " + c.Outcome
	case ioFault && c.Injected == 0:
		return NotReached, "the fault never fired: " + c.What
	case strings.Contains(c.What, "nothing to"):
		return NotReached, c.What
	case c.DuringErrors > 0:
		return Recovered, c.What + "; " + c.Outcome
	case c.Outcome == "nothing needed":
		return Correct, c.What
	}
	return Repaired, c.What + "; " + c.Outcome
}

// ClassifyObject maps an object sweep cell to its outcome.
func ClassifyObject(c experiments.ObjectCordsCell) Outcome {
	switch {
	case strings.HasPrefix(c.Outcome, "not run"):
		return NotRun
	case c.Outcome == "not reached":
		return NotReached
	case strings.HasPrefix(c.Outcome, "FAIL: wrong"):
		return Wrong
	case strings.HasPrefix(c.Outcome, "FAIL: hang"), strings.HasPrefix(c.Outcome, "FAIL: deadline"):
		return Crash
	case strings.HasPrefix(c.Outcome, "FAIL: object not readable"):
		return Lost
	case c.Failed:
		return Unavailable
	case c.Outcome == "correct":
		return Correct
	case strings.HasPrefix(c.Outcome, "dead node"):
		return Recovered
	}
	return Repaired
}
