package report

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Env is where and when a report was produced.
type Env struct {
	Command string // the exact command line that reproduces the report
	Commit  string // git commit (with "+dirty" when the tree had changes outside docs/results)
	Machine string // CPU model, cores, memory, OS/arch
	Date    string // UTC, RFC 3339
}

// CaptureEnv reads the commit and the machine description. It never fails: a
// field it cannot read says "unknown".
func CaptureEnv(command string, now time.Time) Env {
	return Env{
		Command: command,
		Commit:  gitCommit(),
		Machine: machine(),
		Date:    now.UTC().Format(time.RFC3339),
	}
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	// The reports themselves are left out: a run that writes several
	// (torture all) would otherwise name a dirty tree in every report
	// after its first.
	status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)docs/results").Output()
	if err == nil && len(strings.TrimSpace(string(status))) > 0 {
		commit += "+dirty"
	}
	return commit
}

func machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if _, err := fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%d", &kb); err != nil {
					kb = 0 // an unparsable line: memory not reported
				}
			}
		}
		if kb > 0 {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s, %s", cpu, runtime.NumCPU(), mem,
		runtime.GOOS, runtime.GOARCH, runtime.Version())
}
