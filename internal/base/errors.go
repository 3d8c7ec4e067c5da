package base

import (
	"errors"
	"fmt"
)

// ErrCorruption marks an error caused by data that does not match its
// checksum, an uncorrectable flash page, or data lost with a failed die.
// Test with errors.Is(err, ErrCorruption) or IsCorruption.
var ErrCorruption = errors.New("corruption")

// ErrDataLoss marks a corruption that could not be repaired because no
// redundant copy (replica, parity or majority vote) reproduced data that
// matches its checksum. It wraps ErrCorruption.
var ErrDataLoss = fmt.Errorf("data loss: no redundant copy verifies: %w", ErrCorruption)

// ErrInvalidArgument marks an operating error caused by bad input: the request
// changed nothing.
var ErrInvalidArgument = errors.New("invalid argument")

// ErrNoSpace marks an operating error caused by a full device: the write
// changed nothing and may succeed elsewhere, or here once space frees up
// (a node refuses new writes before its device is full, to keep room for
// repairs: node.Config.RepairReserve).
var ErrNoSpace = errors.New("no space")

// ErrAssertionFailed marks a bug: an internal invariant does not hold.
var ErrAssertionFailed = errors.New("assertion failed")

// CorruptionErrorf formats an error that wraps ErrCorruption. Use %w in format
// to wrap a further cause as well.
func CorruptionErrorf(format string, args ...any) error {
	return &markedError{mark: ErrCorruption, err: fmt.Errorf(format, args...)}
}

// DataLossErrorf formats an error that wraps ErrDataLoss (and so ErrCorruption).
func DataLossErrorf(format string, args ...any) error {
	return &markedError{mark: ErrDataLoss, err: fmt.Errorf(format, args...)}
}

// InvalidArgumentf formats an error that wraps ErrInvalidArgument.
func InvalidArgumentf(format string, args ...any) error {
	return &markedError{mark: ErrInvalidArgument, err: fmt.Errorf(format, args...)}
}

// NoSpaceErrorf formats an error that wraps ErrNoSpace.
func NoSpaceErrorf(format string, args ...any) error {
	return &markedError{mark: ErrNoSpace, err: fmt.Errorf(format, args...)}
}

// AssertionFailedf formats an error that wraps ErrAssertionFailed. Callers
// that can continue return it; internal/invariants panics with it in test
// builds.
func AssertionFailedf(format string, args ...any) error {
	return &markedError{mark: ErrAssertionFailed, err: fmt.Errorf(format, args...)}
}

// IsCorruption reports whether err is (or wraps) a corruption.
func IsCorruption(err error) bool { return errors.Is(err, ErrCorruption) }

// IsDataLoss reports whether err is (or wraps) an unrepairable corruption.
func IsDataLoss(err error) bool { return errors.Is(err, ErrDataLoss) }

// IsNoSpace reports whether err is (or wraps) a full device.
func IsNoSpace(err error) bool { return errors.Is(err, ErrNoSpace) }

// IsInvalidArgument reports whether err is (or wraps) a validation failure.
func IsInvalidArgument(err error) bool { return errors.Is(err, ErrInvalidArgument) }

// markedError attaches a class marker to an error while keeping the original
// message and cause chain intact.
type markedError struct {
	mark error
	err  error
}

func (e *markedError) Error() string {
	return e.mark.Error() + ": " + e.err.Error()
}

func (e *markedError) Unwrap() []error { return []error{e.mark, e.err} }
