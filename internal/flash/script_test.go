package flash

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt scripts")

// TestScripts runs the device scripts in testdata/. A script is a sequence
// of commands, each followed by "----" and its expected output, separated by
// blank lines; lines starting with # are comments. Every script runs on a
// fresh memory device of testGeometry (2ch x 2die x 4blk x 8pg x 512+16B).
// Commands:
//
//	program <page> [salt=N]           program one page with pageData(salt)
//	fill <block> [n=N] [salt=N]       program the block's next N pages
//	read <page>                        status and what the data matches
//	erase <block>
//	block <block>                      the block's BlockInfo
//	fail-die <die>
//	mark-bad <block>
//	inject program-fail <page> | erase-fail <block> |
//	       flip <page> bit=N [persistent] | uncorrectable <page>
//	stats                              device totals
//
// Run with -rewrite to regenerate the expected output.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptCase struct {
	comments []string
	cmd      string
	want     string
}

func parseScript(t *testing.T, path string) []scriptCase {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []scriptCase
	var cur *scriptCase
	var comments []string
	inOutput := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inOutput && line == "":
			inOutput, cur = false, nil
		case inOutput:
			cur.want += line + "\n"
		case strings.HasPrefix(line, "#") || (line == "" && cur == nil):
			comments = append(comments, line)
		case line == "----":
			if cur == nil {
				t.Fatalf("%s: ---- without a command", path)
			}
			inOutput = true
		default:
			cases = append(cases, scriptCase{comments: comments, cmd: line})
			cur, comments = &cases[len(cases)-1], nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func runScript(t *testing.T, path string) {
	cases := parseScript(t, path)
	g := testGeometry()
	e := mustMemory(t, g, Options{Seed: 1})
	h := &scriptHarness{e: e, salts: map[PageAddr]int{}}
	var out strings.Builder
	for i := range cases {
		c := &cases[i]
		got := h.run(t, c.cmd)
		if *rewrite {
			c.want = got
		} else if got != c.want {
			t.Errorf("%s: %s\ngot:\n%swant:\n%s", path, c.cmd, got, c.want)
		}
		for _, l := range c.comments {
			out.WriteString(l + "\n")
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", c.cmd, c.want)
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptHarness struct {
	e     *Emulator
	salts map[PageAddr]int // what each programmed page holds
}

func (h *scriptHarness) run(t *testing.T, line string) string {
	fields := strings.Fields(line)
	args := map[string]string{}
	var pos []string
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	intArg := func(k string, def int) int {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: bad %s=%s", line, k, v)
		}
		return n
	}
	arg := func(i int) string {
		if i >= len(pos) {
			t.Fatalf("%s: missing argument %d", line, i+1)
		}
		return pos[i]
	}
	page := func(i int) PageAddr {
		a, err := ParsePageAddr(arg(i))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return a
	}
	block := func(i int) BlockAddr {
		a, err := ParseBlockAddr(arg(i))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return a
	}
	result := func(err error) string {
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return "ok\n"
	}
	g := h.e.Geometry()
	switch fields[0] {
	case "program":
		a, salt := page(0), intArg("salt", 0)
		err := h.e.Program(a, pageData(g, a, byte(salt)), nil)
		if err == nil {
			h.salts[a] = salt
		}
		return result(err)
	case "fill":
		b, salt := block(0), intArg("salt", 0)
		info := h.e.mustBlock(t, b)
		for p := info.WrittenPage; p < info.WrittenPage+intArg("n", g.PagesPerBlock); p++ {
			a := PageAddr{b.Channel, b.Die, b.Block, p}
			if err := h.e.Program(a, pageData(g, a, byte(salt)), nil); err != nil {
				return result(err)
			}
			h.salts[a] = salt
		}
		return "ok\n"
	case "read":
		a := page(0)
		data := make([]byte, g.PageSize)
		st, err := h.e.Read(a, data, nil)
		if err != nil && !st.Uncorrectable {
			return result(err)
		}
		s := st.String() + " " + h.describe(a, data)
		if err != nil {
			s += "\nerror: " + err.Error()
		}
		return s + "\n"
	case "erase":
		b := block(0)
		err := h.e.Erase(b)
		if err == nil {
			for p := 0; p < g.PagesPerBlock; p++ {
				delete(h.salts, PageAddr{b.Channel, b.Die, b.Block, p})
			}
		}
		return result(err)
	case "block":
		info, err := h.e.Block(block(0))
		if err != nil {
			return result(err)
		}
		return info.String() + "\n"
	case "fail-die":
		d, err := ParseDieAddr(arg(0))
		if err != nil {
			t.Fatal(err)
		}
		return result(h.e.FailDie(d))
	case "mark-bad":
		return result(h.e.MarkBad(block(0)))
	case "inject":
		f := h.e.Faults()
		switch arg(0) {
		case "program-fail":
			f.FailProgram(page(1))
		case "erase-fail":
			f.FailErase(block(1))
		case "flip":
			_, persistent := args["persistent"]
			for _, p := range pos[2:] {
				persistent = persistent || p == "persistent"
			}
			f.FlipBit(page(1), intArg("bit", 0), persistent)
		case "uncorrectable":
			f.FailRead(page(1))
		case "lost-program":
			f.LoseProgram(page(1))
		case "clear":
			f.Clear()
		default:
			t.Fatalf("%s: unknown fault", line)
		}
		return fmt.Sprintf("pending %d\n", f.Pending())
	case "stats":
		s := h.e.Stats()
		return fmt.Sprintf("%s\n", s)
	}
	t.Fatalf("unknown command %q", line)
	return ""
}

// describe says what data holds: erased cells, the page's programmed
// content, or which bits differ from it.
func (h *scriptHarness) describe(a PageAddr, data []byte) string {
	g := h.e.Geometry()
	erased := true
	for _, b := range data {
		erased = erased && b == 0xFF
	}
	salt, ok := h.salts[a]
	if !ok || erased {
		if !erased {
			return "data=garbage"
		}
		return "data=erased"
	}
	want := pageData(g, a, byte(salt))
	var diff []string
	for i := range data {
		for bit := 0; bit < 8; bit++ {
			if (data[i]^want[i])&(1<<bit) != 0 {
				diff = append(diff, strconv.Itoa(i*8+bit))
			}
		}
	}
	if len(diff) == 0 {
		return fmt.Sprintf("data=salt%d", salt)
	}
	return fmt.Sprintf("data=salt%d flipped bits %s", salt, strings.Join(diff, ","))
}
