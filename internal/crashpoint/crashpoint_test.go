package crashpoint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Spec
	}{
		{"raftlog-copy@3", Spec{"raftlog-copy", 3}},
		{"chunk-sums", Spec{"chunk-sums", 1}},
		{" sdf-zone-erased@1 ", Spec{"sdf-zone-erased", 1}},
	} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Fatalf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "@3", "nosuchpoint@1", "raftlog-copy@0", "raftlog-copy@-2", "raftlog-copy@x", "raftlog-copy@", "raftlog-copy@1@2"} {
		if s, err := Parse(bad); err == nil {
			t.Fatalf("Parse(%q) accepted: %v", bad, s)
		}
	}
}

func TestArmFromEnvRejects(t *testing.T) {
	t.Setenv(Env, "raftlog-cpy@2")
	if _, ok, err := ArmFromEnv(); err == nil || ok || !strings.Contains(err.Error(), "unknown point") {
		t.Fatalf("ArmFromEnv with a misspelt name: ok %v, err %v", ok, err)
	}
	if armed.Load() != nil {
		t.Fatal("a rejected variable armed the process")
	}
	t.Setenv(Env, "")
	if _, ok, err := ArmFromEnv(); ok || err != nil {
		t.Fatalf("an empty variable: ok %v, err %v", ok, err)
	}
}

// TestHitCountsOnlyTheArmedPoint: the crash comes at exactly the n-th hit
// of the armed point, other points' hits do not count, and a disarmed Hit
// does nothing.
func TestHitCountsOnlyTheArmedPoint(t *testing.T) {
	defer Disarm()
	Hit("chunk-data") // disarmed: nothing
	var crashed []Spec
	Arm(Spec{"chunk-data", 3}, func(s Spec) { crashed = append(crashed, s) })
	for i := 0; i < 5; i++ {
		Hit("chunk-sums")
		HitIf(false, "chunk-data")
		Hit("chunk-data")
		if got, want := len(crashed), map[bool]int{true: 1, false: 0}[i >= 2]; got != want {
			t.Fatalf("after %d hits: %d crashes, want %d", i+1, got, want)
		}
	}
	if Hits() != 5 {
		t.Fatalf("Hits() = %d, want 5", Hits())
	}
	Disarm()
	Hit("chunk-data")
	if len(crashed) != 1 || Hits() != 0 {
		t.Fatalf("disarmed: %d crashes, %d hits", len(crashed), Hits())
	}
}

func BenchmarkHitDisarmed(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Hit("raftlog-copy")
	}
}

// TestCrashKillsAtOnce runs this test binary as a child armed at
// meta-copy@2: the child must die by SIGKILL at the second hit, after
// printing the reached line, with the write after the point and its
// deferred write never done.
func TestCrashKillsAtOnce(t *testing.T) {
	if dir := os.Getenv("CRASHPOINT_CHILD_DIR"); dir != "" {
		if _, ok, err := ArmFromEnv(); !ok || err != nil {
			t.Fatalf("child not armed: %v", err)
		}
		defer os.WriteFile(filepath.Join(dir, "deferred"), nil, 0o644)
		for i := 1; i <= 3; i++ {
			if err := os.WriteFile(filepath.Join(dir, "before-"+strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			Hit("meta-copy")
		}
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKillsAtOnce$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CRASHPOINT_CHILD_DIR="+dir, Env+"=meta-copy@2")
	out, err := cmd.Output()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child did not die: %v\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended by %v, not SIGKILL", ee)
	}
	if !strings.Contains(string(out), Reached(Spec{"meta-copy", 2})) {
		t.Fatalf("child's output lacks the reached line:\n%s", out)
	}
	for name, want := range map[string]bool{"before-1": true, "before-2": true, "before-3": false, "deferred": false} {
		_, err := os.Stat(filepath.Join(dir, name))
		if got := err == nil; got != want {
			t.Fatalf("%s exists: %v, want %v", name, got, want)
		}
	}
}

// TestEveryHitRegistered parses every Go file of the repository: every
// crashpoint.Hit and HitIf names a registered point with a string
// literal, and every registered point is placed at least once.
func TestEveryHitRegistered(t *testing.T) {
	root := filepath.Join("..", "..")
	placed := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "internal/crashpoint/") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Hit" && sel.Sel.Name != "HitIf") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "crashpoint" {
				return true
			}
			lit, ok := call.Args[len(call.Args)-1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: a crash point named by a non-literal", fset.Position(call.Pos()))
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			if _, ok := Lookup(name); !ok {
				t.Errorf("%s: crash point %q is not registered", fset.Position(call.Pos()), name)
			}
			placed[name] = append(placed[name], fset.Position(call.Pos()).String())
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range Points {
		if seen[p.Name] {
			t.Errorf("point %q registered twice", p.Name)
		}
		seen[p.Name] = true
		if p.Doc == "" || p.Layer == "" {
			t.Errorf("point %q has no description or layer", p.Name)
		}
		if len(placed[p.Name]) == 0 {
			t.Errorf("point %q is registered but placed nowhere", p.Name)
		}
	}
}
