package flash

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/flashmend/flashmend/internal/base"
)

// ParsePageAddr parses the String form of a PageAddr, "ch1/d0/b12/p3".
func ParsePageAddr(s string) (PageAddr, error) {
	v, err := parseAddr(s, "ch", "d", "b", "p")
	if err != nil {
		return PageAddr{}, err
	}
	return PageAddr{v[0], v[1], v[2], v[3]}, nil
}

// ParseBlockAddr parses the String form of a BlockAddr, "ch1/d0/b12".
func ParseBlockAddr(s string) (BlockAddr, error) {
	v, err := parseAddr(s, "ch", "d", "b")
	if err != nil {
		return BlockAddr{}, err
	}
	return BlockAddr{v[0], v[1], v[2]}, nil
}

// ParseDieAddr parses the String form of a DieAddr, "ch1/d0".
func ParseDieAddr(s string) (DieAddr, error) {
	v, err := parseAddr(s, "ch", "d")
	if err != nil {
		return DieAddr{}, err
	}
	return DieAddr{v[0], v[1]}, nil
}

func parseAddr(s string, prefixes ...string) ([]int, error) {
	parts := strings.Split(s, "/")
	if len(parts) != len(prefixes) {
		return nil, base.InvalidArgumentf("flash: address %q: want %s", s, addrPattern(prefixes))
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		num, ok := strings.CutPrefix(p, prefixes[i])
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 {
			return nil, base.InvalidArgumentf("flash: address %q: want %s", s, addrPattern(prefixes))
		}
		out[i] = n
	}
	return out, nil
}

func addrPattern(prefixes []string) string {
	var b strings.Builder
	for i, p := range prefixes {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprintf(&b, "%sN", p)
	}
	return b.String()
}
