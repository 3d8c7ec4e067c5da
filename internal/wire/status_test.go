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
