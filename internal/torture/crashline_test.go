package torture

import "testing"

func TestCrashLineSaysWhere(t *testing.T) {
	out := `some log line
panic: runtime error: integer divide by zero

goroutine 77 [running]:
runtime.panicdivide()
	/usr/local/go/src/runtime/panic.go:1 +0x18
github.com/cockroachdb/pebble/v2.(*DB).something(0x1)
	/root/go/pkg/mod/github.com/cockroachdb/pebble/v2@v2.1.7/db.go:123 +0x2a
created by x
`
	want := "panic: runtime error: integer divide by zero at github.com/cockroachdb/pebble/v2.(*DB).something(0x1) (/root/go/pkg/mod/github.com/cockroachdb/pebble/v2@v2.1.7/db.go:123)"
	if got := crashLine(out); got != want {
		t.Fatalf("crashLine:\n got %s\nwant %s", got, want)
	}
	if got := crashLine("panic: boom\n"); got != "panic: boom" {
		t.Fatalf("no stack: %q", got)
	}
	if got := crashLine("exit status 2\n"); got != "exit status 2" {
		t.Fatalf("no panic: %q", got)
	}
}
