package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestModelDirect(t *testing.T) {
	out, errOut, code := runCLI(t, "model", "direct")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"1.055e-03", "2.951e-10", "1.238e-18", "2.951e-25", "note: DIRECT (SoCC'19 and tech report) Table 1 prints 1e-28"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, errOut, code = runCLI(t, "model", "direct", "--sweep", "--format", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 15 || lines[0] != "uber,block,chunk,chunk_taylor,majority_vote" || !strings.HasPrefix(lines[1], "1e-16,") {
		t.Fatalf("sweep csv:\n%s", out)
	}

	out, _, code = runCLI(t, "model", "direct", "--uber", "1e-9", "--block", "1MiB", "--chunk", "4KiB", "--replicas", "2", "--format", "json")
	var tables []struct {
		Title string           `json:"title"`
		Rows  []map[string]any `json:"rows"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &tables) != nil || len(tables) != 1 || len(tables[0].Rows) != 1 {
		t.Fatalf("json exit %d:\n%s", code, out)
	}
	if !strings.Contains(tables[0].Title, "B=1MiB C=4KiB R=2") || tables[0].Rows[0]["uber"] != 1e-9 {
		t.Fatalf("json table %+v", tables[0])
	}

	for _, bad := range [][]string{
		{"model", "direct", "--uber", "2"},
		{"model", "direct", "--chunk", "1GiB"},
		{"model", "direct", "--format", "xml"},
		{"model", "direct", "--block", "12Q"},
		{"model", "direct", "--sweep", "--from", "1e-3", "--to", "1e-6"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d; want 2", bad, code)
		}
	}
}

func TestModelECC(t *testing.T) {
	out, errOut, code := runCLI(t, "model", "ecc", "--codeword-bits", "64", "--correctable-bits", "2", "--rber", "0.02", "--target", "1e-6")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// P(Binomial(64, 0.02) > 2) = 0.1366 (checked in internal/model).
	for _, want := range []string{"0.02  1.366e-01         2.135e-03", "1e-06        1.1747e-03"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{
		{"model", "ecc", "--codeword-bits", "0"},
		{"model", "ecc", "--correctable-bits", "100000"},
		{"model", "ecc", "--from", "0.1", "--to", "0.01"},
		{"model", "ecc", "--target", "-1"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d; want 2", bad, code)
		}
	}
}

func TestModelReparo(t *testing.T) {
	out, errOut, code := runCLI(t, "model", "reparo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"33.33   14.29   6.67     3.23     1.59     0.79",
		"6.67    3.23    1.59     0.79     0.39     0.20",
		"3->core0 as _60, 7->core1 as _61, 11->core2 as _62",
		"P2 grows 64.0x", "P_rf grows 52.4x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "model", "reparo", "--format", "csv", "--example-cores", "2", "--example-dies-per-core", "2", "--example-logical", "6", "--example-die-capacity", "3")
	if code != 0 || !strings.Contains(out, "redirected in unit 0,1->core0 as _6") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, bad := range [][]string{
		{"model", "reparo", "--cores", "0"},
		{"model", "reparo", "--die-failure-prob", "2"},
		{"model", "reparo", "--ssds", "1"},
		{"model", "reparo", "--rebuild-rate", "0"},
		{"model", "reparo", "--example-logical", "1000"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d; want 2", bad, code)
		}
	}
}

func TestModelChameleon(t *testing.T) {
	out, errOut, code := runCLI(t, "model", "chameleon", "--writes", "8,0,4,2", "--page-writes", "6400", "--utilization", "0.5,0.75")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"3      2       5\n", "0.5                 2                    200\n", "0.75                4                    400\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{
		{"model", "chameleon", "--writes", "1,-2"},
		{"model", "chameleon", "--utilization", "1"},
		{"model", "chameleon", "--pages-per-block", "0"},
		{"model", "chameleon", "--page-writes", "-5"},
	} {
		if _, _, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d; want 2", bad, code)
		}
	}
}
