package wire

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
)

// TestStatusRoundTrip sends every error class through ToStatus and
// FromStatus and checks that the class, and the message, survive.
func TestStatusRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
		is   func(error) bool
	}{
		{"invalid", base.InvalidArgumentf("bad key %q", "k"), codes.InvalidArgument, base.IsInvalidArgument},
		{"corruption", base.CorruptionErrorf("chunk 3 sector 7"), codes.Aborted, base.IsCorruption},
		{"data loss", base.DataLossErrorf("chunk 3: every replica bad"), codes.DataLoss, base.IsDataLoss},
		{"no space", base.NoSpaceErrorf("node 3: device near full"), codes.ResourceExhausted, base.IsNoSpace},
		{"not found", fmt.Errorf("chunk x: %w", fs.ErrNotExist), codes.NotFound, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), codes.Canceled, func(err error) bool { return status.Code(err) == codes.Canceled }},
		{"other", errors.New("disk full"), codes.Internal, func(err error) bool { return status.Code(err) == codes.Internal }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ToStatus(tc.err)
			if got := status.Code(st); got != tc.code {
				t.Fatalf("ToStatus(%v) code %v, want %v", tc.err, got, tc.code)
			}
			back := FromStatus(st)
			if !tc.is(back) {
				t.Fatalf("FromStatus(ToStatus(%v)) = %v lost its class", tc.err, back)
			}
			if back.Error() != tc.err.Error() && status.Convert(back).Message() != tc.err.Error() {
				t.Fatalf("message %q, want %q", back.Error(), tc.err.Error())
			}
		})
	}
	if ToStatus(nil) != nil || FromStatus(nil) != nil {
		t.Fatal("nil must stay nil")
	}
	// A wrapped full-device error keeps its class; gRPC's own
	// ResourceExhausted (a message over its limit) does not become one.
	if back := FromStatus(ToStatus(fmt.Errorf("node 2: write: %w", base.NoSpaceErrorf("device full")))); !base.IsNoSpace(back) {
		t.Fatalf("wrapped no-space error lost its class: %v", back)
	}
	if base.IsNoSpace(FromStatus(status.Error(codes.ResourceExhausted, "grpc: received message larger than max"))) {
		t.Fatal("gRPC's message size error taken for a full device")
	}
	// A data loss is a corruption too, on both sides of the wire.
	if !base.IsCorruption(FromStatus(ToStatus(base.DataLossErrorf("x")))) {
		t.Fatal("data loss lost its corruption class")
	}
}

func TestLiveKey(t *testing.T) {
	if got, want := LiveKey(7), "/flashmend/live/7"; got != want {
		t.Fatalf("LiveKey(7) = %q, want %q", got, want)
	}
}
