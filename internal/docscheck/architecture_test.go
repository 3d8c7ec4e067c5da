package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

func readArchitecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasGo reports whether dir (relative to the root) holds a Go file.
func hasGo(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	return len(m) > 0
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// TestNamedPackagesExist: every package path in a code span of the doc is
// a directory of Go code, as written or under internal/.
func TestNamedPackagesExist(t *testing.T) {
	doc := readArchitecture(t)
	path := regexp.MustCompile(`^[a-z][a-z0-9]*(/[a-z][a-z0-9_]*)+/?$`)
	checked := 0
	for _, m := range codeSpan.FindAllStringSubmatch(doc, -1) {
		span := strings.TrimSuffix(m[1], "/")
		if !path.MatchString(m[1]) || strings.HasPrefix(span, "docs/") || strings.HasPrefix(span, "proto/") {
			continue
		}
		checked++
		if !hasGo(span) && !hasGo(filepath.Join("internal", span)) {
			t.Errorf("docs/architecture.md names `%s`: no Go package there", m[1])
		}
	}
	if checked < 30 {
		t.Fatalf("only %d package paths found in the doc: the check reads it wrong", checked)
	}
}

// TestWhereToFindEachIdea: the paragraph that answers "where is the DIRECT
// vote, the raft patch, the die identifier, the wear balancer, the
// simulator" names each of them, and every function, type or method it
// names in a code span is declared in the package named just before it.
func TestWhereToFindEachIdea(t *testing.T) {
	doc := readArchitecture(t)
	start := strings.Index(doc, "Where to find each idea:")
	if start < 0 {
		t.Fatal(`docs/architecture.md has no "Where to find each idea:" paragraph`)
	}
	para := doc[start:]
	if end := strings.Index(para, "\n\n"); end >= 0 {
		para = para[:end]
	}
	for _, topic := range []string{"DIRECT vote", "raft", "die", "identifier", "wear balancer", "simulator"} {
		if !strings.Contains(para, topic) {
			t.Errorf("the paragraph does not mention %q", topic)
		}
	}
	// A name resolves in one of the packages named before it in the
	// paragraph, the nearest first (the prose nests: "run by `internal/kv`
	// (..., with the tools of `internal/kv/engine`; `apply.go`: ...)").
	ident := regexp.MustCompile(`^(?:[a-z]+\.)?([A-Z][A-Za-z0-9]*\.)?([A-Za-z][A-Za-z0-9]*)$`)
	var pkgs []string
	for _, m := range codeSpan.FindAllStringSubmatch(para, -1) {
		span := m[1]
		if hasGo(span) {
			pkgs = append([]string{span}, pkgs...)
			continue
		}
		if strings.HasSuffix(span, ".go") {
			found := false
			for _, pkg := range pkgs {
				if _, err := os.Stat(filepath.Join(root, pkg, span)); err == nil {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("`%s` is a file of none of %v", span, pkgs)
			}
			continue
		}
		im := ident.FindStringSubmatch(span)
		if im == nil || len(pkgs) == 0 {
			continue
		}
		name := im[2]
		decl := regexp.MustCompile(`(?m)^(func (\([^)]*\) )?` + name + `[\[(]|type ` + name + `\b)`)
		found := false
		for _, pkg := range pkgs {
			if declaredIn(t, decl, pkg) || declaredUnder(t, decl, pkg) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("`%s`: %s is declared in none of %v", span, name, pkgs)
		}
	}
}

func declaredIn(t *testing.T, decl *regexp.Regexp, dir string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if decl.Match(b) {
			return true
		}
	}
	return false
}

// declaredUnder also looks in dir's subpackages (the paragraph names
// `wear.Balancer` after `internal/wear`, `sim.Run` after `internal/sim`,
// and a method of a type in a subpackage after its parent).
func declaredUnder(t *testing.T, decl *regexp.Regexp, dir string) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err != nil || found || !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		found = declaredIn(t, decl, rel)
		return nil
	})
	return found
}
