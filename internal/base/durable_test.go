package base

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileDurable: the file is written and replaced whole with the
// mode asked, no temporary file is left, and a missing directory is an
// error that changes nothing.
func TestWriteFileDurable(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "marker")
	for _, content := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteFileDurable(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Fatalf("left in the directory: %v", names)
	}
	if err := WriteFileDurable(filepath.Join(dir, "nope", "x"), []byte("x"), 0o644); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

// TestMkdirAllDurable: the parent of every directory created is synced,
// top-down, and nothing when all exist.
func TestMkdirAllDurable(t *testing.T) {
	root := t.TempDir()
	var synced []string
	record := func(dir string) {
		rel, _ := filepath.Rel(root, dir)
		synced = append(synced, filepath.ToSlash(rel))
	}
	if err := MkdirAllDurable(filepath.Join(root, "a", "b", "c"), 0o755, record); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(synced, " "), ". a a/b"; got != want {
		t.Fatalf("synced %q, want %q", got, want)
	}
	if st, err := os.Stat(filepath.Join(root, "a", "b", "c")); err != nil || !st.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	synced = nil
	if err := MkdirAllDurable(filepath.Join(root, "a", "b"), 0o755, record); err != nil || len(synced) != 0 {
		t.Fatalf("existing directory: synced %v, err %v", synced, err)
	}
	if err := MkdirAllDurable(filepath.Join(root, "a", "b", "c", "d"), 0o755, record); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(synced, " "), "a/b/c"; got != want {
		t.Fatalf("one new directory: synced %q, want %q", got, want)
	}
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(filepath.Join(f, "x"), 0o755, nil); err == nil {
		t.Fatal("a directory under a file was made")
	}
}
