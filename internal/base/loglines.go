package base

import (
	"fmt"
	"strings"
	"sync"
)

// LogLines collects log lines from several goroutines: its Logf is the
// Logf option of a coordinator, a node or a cluster whose log a test or an
// experiment reads back with String. The zero value is ready to use.
type LogLines struct {
	mu sync.Mutex
	b  strings.Builder
}

// Logf appends one line.
func (l *LogLines) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

// String returns every line so far.
func (l *LogLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
