package base

import (
	"os"
	"path/filepath"
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
