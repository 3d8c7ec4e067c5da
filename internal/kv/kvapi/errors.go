package kvapi

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/gen/kvpb"
)

// Error is a KV error with a reason the client library acts on.
type Error struct {
	Reason kvpb.ErrorDetail_Reason
	// Leader is the node believed to lead the shard (NOT_LEADER), or 0.
	Leader base.NodeID
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("kv: %s: %s", e.Reason, e.Msg) }

// Is makes errors.Is(err, ErrTxnAborted) and friends work.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason && t.Msg == ""
}

var (
	// ErrTxnAborted: a transaction's reads changed or its snapshot was
	// invalidated by a repair; retry it.
	ErrTxnAborted = &Error{Reason: kvpb.ErrorDetail_TXN_ABORTED}
	// ErrConditionFailed: a compare-and-set or batch condition did not hold.
	ErrConditionFailed = &Error{Reason: kvpb.ErrorDetail_CONDITION_FAILED}
	// ErrNotLeader: the replica does not lead its shard.
	ErrNotLeader = &Error{Reason: kvpb.ErrorDetail_NOT_LEADER}
	// ErrReplicaUnavailable: the replica is down or rebuilding.
	ErrReplicaUnavailable = &Error{Reason: kvpb.ErrorDetail_REPLICA_UNAVAILABLE}
)

func NewError(reason kvpb.ErrorDetail_Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// ToStatus maps an error to a gRPC status carrying an ErrorDetail.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isKVError(err) {
		return err
	}
	var kerr *Error
	code := codes.Internal
	detail := &kvpb.ErrorDetail{}
	switch {
	case errors.As(err, &kerr):
		detail.Reason = kerr.Reason
		detail.LeaderNode = uint64(kerr.Leader)
		switch kerr.Reason {
		case kvpb.ErrorDetail_NOT_LEADER, kvpb.ErrorDetail_CONDITION_FAILED:
			code = codes.FailedPrecondition
		case kvpb.ErrorDetail_TXN_ABORTED:
			code = codes.Aborted
		default:
			code = codes.Unavailable
		}
	case base.IsInvalidArgument(err):
		code = codes.InvalidArgument
	case base.IsCorruption(err):
		code = codes.Unavailable
		detail.Reason = kvpb.ErrorDetail_CORRUPTION
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	st := status.New(code, err.Error())
	if detail.Reason != kvpb.ErrorDetail_UNKNOWN {
		if with, werr := st.WithDetails(detail); werr == nil {
			st = with
		}
	}
	return st.Err()
}

func isKVError(err error) bool {
	var kerr *Error
	return errors.As(err, &kerr)
}

// FromStatus turns a gRPC error back into a KV error where it carries one.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if det, ok := d.(*kvpb.ErrorDetail); ok {
			if det.Reason == kvpb.ErrorDetail_CORRUPTION {
				return base.CorruptionErrorf("%s", st.Message())
			}
			return &Error{Reason: det.Reason, Leader: base.NodeID(det.LeaderNode), Msg: st.Message()}
		}
	}
	if st.Code() == codes.InvalidArgument {
		return base.InvalidArgumentf("%s", st.Message())
	}
	return err
}
