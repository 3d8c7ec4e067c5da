package wire

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"google.golang.org/grpc/status"

	"github.com/flashmend/flashmend/internal/base"
)

// FuzzStatusClasses: an error of every class, with any message, crosses
// the wire (ToStatus, then FromStatus on the other side) with its class
// and message, and a second crossing (a node relaying a peer's error) keeps
// them too. The class is what callers act on (repair a corruption, never
// retry an invalid argument), so a message must never change it.
func FuzzStatusClasses(f *testing.F) {
	for i, msg := range []string{"chunk o1/v2/s0/c3", "data loss: no redundant copy verifies: corruption: x", "no space left: x", "invalid argument: y", "", "\xff\x00"} {
		f.Add(msg, uint8(i))
	}
	f.Fuzz(func(t *testing.T, msg string, class uint8) {
		type cls struct {
			name string
			err  error
			is   func(error) bool
		}
		classes := []cls{
			{"invalid argument", base.InvalidArgumentf("%s", msg), base.IsInvalidArgument},
			{"corruption", base.CorruptionErrorf("%s", msg), base.IsCorruption},
			{"data loss", base.DataLossErrorf("%s", msg), base.IsDataLoss},
			{"no space", base.NoSpaceErrorf("%s", msg), base.IsNoSpace},
			{"not found", fmt.Errorf("%s: %w", msg, fs.ErrNotExist), func(e error) bool { return errors.Is(e, fs.ErrNotExist) }},
			{"canceled", fmt.Errorf("%s: %w", msg, context.Canceled), func(e error) bool { return status.Code(e).String() == "Canceled" }},
			{"other", errors.New(msg), func(e error) bool { return status.Code(e).String() == "Internal" }},
		}
		c := classes[int(class)%len(classes)]
		once := FromStatus(ToStatus(c.err))
		twice := FromStatus(ToStatus(once))
		for i, got := range []error{once, twice} {
			if !c.is(got) {
				t.Fatalf("%s error %q after %d crossings: %v (class lost)", c.name, msg, i+1, got)
			}
			if !strings.Contains(got.Error(), msg) {
				t.Fatalf("%s error %q after %d crossings: message %q", c.name, msg, i+1, got.Error())
			}
			// No other class is gained on the way.
			for _, o := range classes[:4] {
				if o.name != c.name && o.is(got) && !(c.name == "data loss" && o.name == "corruption") {
					t.Fatalf("%s error %q after %d crossings is also %s: %v", c.name, msg, i+1, o.name, got)
				}
			}
		}
	})
}
