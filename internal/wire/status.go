package wire

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
)

// ToStatus maps flashmend's error classes onto gRPC status codes so they
// survive the wire: invalid argument, not found (fs.ErrNotExist), corruption
// (Aborted), data loss (DataLoss), a full device (ResourceExhausted), cancellation and deadlines, and the rest
// as Internal. An error that already is a gRPC status and carries no class
// passes through unchanged.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !base.IsCorruption(err) && !base.IsInvalidArgument(err) && !base.IsNoSpace(err) {
		return err
	}
	switch {
	case base.IsInvalidArgument(err):
		return status.Error(codes.InvalidArgument, err.Error())
	case base.IsDataLoss(err):
		return status.Error(codes.DataLoss, err.Error())
	case base.IsCorruption(err):
		return status.Error(codes.Aborted, err.Error())
	case base.IsNoSpace(err):
		// The class prefix tells a full device from gRPC's own
		// ResourceExhausted (messages over its size limits).
		msg := err.Error()
		if !strings.HasPrefix(msg, base.ErrNoSpace.Error()+": ") {
			msg = base.ErrNoSpace.Error() + ": " + msg
		}
		return status.Error(codes.ResourceExhausted, msg)
	case errors.Is(err, fs.ErrNotExist):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// FromStatus maps a gRPC error back to flashmend's error classes; a NotFound
// status wraps fs.ErrNotExist.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return base.InvalidArgumentf("%s", strings.TrimPrefix(st.Message(), base.ErrInvalidArgument.Error()+": "))
	case codes.DataLoss:
		return base.DataLossErrorf("%s", strings.TrimPrefix(st.Message(), base.ErrDataLoss.Error()+": "))
	case codes.Aborted:
		return base.CorruptionErrorf("%s", strings.TrimPrefix(st.Message(), base.ErrCorruption.Error()+": "))
	case codes.ResourceExhausted:
		// NB: gRPC itself answers ResourceExhausted for messages over its
		// size limits; only a full device's status carries the class prefix.
		if msg, ok := strings.CutPrefix(st.Message(), base.ErrNoSpace.Error()+": "); ok {
			return base.NoSpaceErrorf("%s", msg)
		}
	case codes.NotFound:
		return &notFound{msg: st.Message()}
	}
	return err
}

type notFound struct{ msg string }

func (e *notFound) Error() string { return e.msg }
func (e *notFound) Unwrap() error { return fs.ErrNotExist }
