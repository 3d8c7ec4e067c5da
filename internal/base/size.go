package base

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes is a size or an offset in bytes. Flags and configuration accept the
// binary suffixes KiB, MiB, GiB, TiB (and K, M, G, T as the same binary units).
type Bytes int64

// Binary size units.
const (
	B   Bytes = 1
	KiB       = 1024 * B
	MiB       = 1024 * KiB
	GiB       = 1024 * MiB
	TiB       = 1024 * GiB
)

var units = []struct {
	suffix string
	size   Bytes
}{
	{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB},
}

// String prints the size with the largest binary unit that divides it
// exactly, so that String and ParseBytes round-trip.
func (b Bytes) String() string {
	if b == 0 {
		return "0B"
	}
	for _, u := range units {
		if b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// Set implements pflag.Value so a Bytes can be a command-line flag.
func (b *Bytes) Set(s string) error {
	v, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Type implements pflag.Value.
func (b *Bytes) Type() string { return "bytes" }

// ParseBytes parses "65536", "64KiB", "64K", "1.5MiB", "128MB" (decimal-looking
// suffixes are read as binary units, as storage tools conventionally do).
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, InvalidArgumentf("empty size")
	}
	mult := B
	lower := strings.ToLower(t)
	for _, u := range []struct {
		suffixes []string
		size     Bytes
	}{
		{[]string{"tib", "tb", "t"}, TiB},
		{[]string{"gib", "gb", "g"}, GiB},
		{[]string{"mib", "mb", "m"}, MiB},
		{[]string{"kib", "kb", "k"}, KiB},
		{[]string{"b"}, B},
	} {
		matched := false
		for _, suf := range u.suffixes {
			if strings.HasSuffix(lower, suf) {
				lower = strings.TrimSpace(strings.TrimSuffix(lower, suf))
				mult = u.size
				matched = true
				break
			}
		}
		if matched {
			break
		}
	}
	f, err := strconv.ParseFloat(lower, 64)
	if err != nil || f < 0 {
		return 0, InvalidArgumentf("bad size %q", s)
	}
	v := f * float64(mult)
	if v > float64(1<<62) {
		return 0, InvalidArgumentf("size %q too large", s)
	}
	if v != float64(int64(v)) {
		return 0, InvalidArgumentf("size %q is not a whole number of bytes", s)
	}
	return Bytes(int64(v)), nil
}

// MustParseBytes is ParseBytes for constants in tests and defaults.
func MustParseBytes(s string) Bytes {
	b, err := ParseBytes(s)
	if err != nil {
		panic(fmt.Sprintf("base.MustParseBytes(%q): %v", s, err))
	}
	return b
}
