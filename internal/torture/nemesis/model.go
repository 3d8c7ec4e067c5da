package nemesis

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// kvInput is one operation on one key of the KV store.
type kvInput struct {
	op    string // "get", "put" or "cas"
	key   string
	old   string // cas: the value expected
	value string // put, cas: the value written
}

// kvOutput is what the operation returned. An operation whose outcome is
// unknown (it failed after it may have reached the leader) is recorded
// with its return at the end of the history, as Jepsen does: the checker
// may place it anywhere after its call, including never.
type kvOutput struct {
	value   string // get: the value read ("" when absent)
	ok      bool   // cas: swapped
	unknown bool   // put, cas: outcome unknown
}

// registerModel is a map of independent registers, one per key, each
// starting absent (""). Partitioning by key keeps the check linear in the
// number of keys.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(kvInput), output.(kvOutput)
		switch in.op {
		case "get":
			return out.value == s, s
		case "put":
			return true, in.value
		case "cas":
			switch {
			case out.unknown: // applied iff it could have swapped
				if s == in.old {
					return true, in.value
				}
				return true, s
			case out.ok:
				return s == in.old, in.value
			default:
				return s != in.old, s
			}
		}
		return false, s
	},
	Equal: func(a, b any) bool { return a.(string) == b.(string) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch {
		case in.op == "get":
			return fmt.Sprintf("get(%s) -> %q", in.key, out.value)
		case in.op == "put" && out.unknown:
			return fmt.Sprintf("put(%s, %q) -> ?", in.key, in.value)
		case in.op == "put":
			return fmt.Sprintf("put(%s, %q)", in.key, in.value)
		case out.unknown:
			return fmt.Sprintf("cas(%s, %q, %q) -> ?", in.key, in.old, in.value)
		}
		return fmt.Sprintf("cas(%s, %q, %q) -> %v", in.key, in.old, in.value, out.ok)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state.(string)) },
}
