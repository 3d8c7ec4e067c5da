package invariants

import "github.com/flashmend/flashmend/internal/base"

// Check returns nil when cond holds. Otherwise it panics in invariants builds
// and returns an assertion error (base.ErrAssertionFailed) in others.
func Check(cond bool, format string, args ...any) error {
	if cond {
		return nil
	}
	err := base.AssertionFailedf(format, args...)
	if Enabled {
		panic(err)
	}
	return err
}
