package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestAcquireTwiceFailsWithHolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: a second Acquire in the same
	// process is refused like one from another process.
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want a HeldError", err)
	}
	want := fmt.Sprintf("another flashmend is running on %s (pid %d)", dir, os.Getpid())
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	if pid, ok := Holder(dir); !ok || pid != os.Getpid() {
		t.Fatalf("Holder = %d, %v", pid, ok)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Close: %v", err)
	}
	l2.Close()
}

func TestHolderOfStaleFile(t *testing.T) {
	dir := t.TempDir()
	if _, ok := Holder(dir); ok {
		t.Fatal("a directory without a lock file is held")
	}
	// A pid that cannot exist (above any pid_max) stands for a dead holder.
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("2147483647\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, ok := Holder(dir); ok || pid != 2147483647 {
		t.Fatalf("Holder = %d, %v; want 2147483647, not held", pid, ok)
	}
	os.WriteFile(filepath.Join(dir, FileName), []byte("garbage"), 0o644)
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire over a stale file: %v", err)
	}
	defer l.Close()
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if string(b) != fmt.Sprintf("%d\n", os.Getpid()) {
		t.Fatalf("lock file holds %q", b)
	}
}
