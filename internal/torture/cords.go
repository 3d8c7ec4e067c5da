package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/bitrot"
	"github.com/flashmend/flashmend/internal/experiments"
)

// CellEnv is the environment variable that makes a process a KV cell's
// child: it holds the cell's CellParams as JSON.
const CellEnv = "FLASHMEND_TORTURE_CELL"

// cellMarker starts the child's result line on stdout.
const cellMarker = "TORTURE-CELL "

// CellParams are one KV cell's inputs.
type CellParams struct {
	Dir   string // where KVCordsBase wrote the stored cluster
	File  string // the file of replica n1 to damage
	Fault string // one of experiments.KVCordsFaults
	Keys  int
	Seed  int64
	// Store is where the replicas' files are: "" (files in memory, a
	// copy of the stored cluster on plain files) or "sdf" (each node's
	// replicas on sdfvfs over SDF over its own file-backed emulated
	// flash device).
	Store string `json:",omitempty"`
}

// RunCellFromEnv runs the KV cell named by CellEnv, if set, and writes its
// result to stdout; it reports whether it did.
func RunCellFromEnv(ctx context.Context, stdout io.Writer) (bool, error) {
	raw := os.Getenv(CellEnv)
	if raw == "" {
		return false, nil
	}
	var p CellParams
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return true, fmt.Errorf("torture cell: %s: %w", CellEnv, err)
	}
	cellFn := experiments.KVCordsCell
	switch p.Store {
	case "":
	case StoreSDF:
		cellFn = experiments.KVFlashCordsCell
	default:
		return true, fmt.Errorf("torture cell: unknown store %q (want \"\" or %q)", p.Store, StoreSDF)
	}
	cell, err := cellFn(ctx, p.Dir, p.File, p.Fault, p.Keys, p.Seed)
	if err != nil {
		return true, err
	}
	b, err := json.Marshal(cell)
	if err != nil {
		return true, err
	}
	_, err = fmt.Fprintf(stdout, "%s%s\n", cellMarker, b)
	return true, err
}

// KVCell is one measured KV cell.
type KVCell struct {
	Params  CellParams
	Kind    string
	Cell    experiments.KVSweepCell
	Outcome Outcome
	Reason  string
	Wall    time.Duration
}

// StoreSDF runs the KV sweep with every node's replicas on emulated flash.
const StoreSDF = "sdf"

// KVOptions configure the KV CORDS sweep.
type KVOptions struct {
	Keys int
	Seed int64
	// Store: "" (files in memory) or StoreSDF (emulated flash).
	Store string
	// Faults are the columns (nil: experiments.KVCordsFaults).
	Faults []string
	// Cell, if set, picks the cells to run (kind, fault).
	Cell func(kind, fault string) bool
	// Argv starts a child that runs the cell named by CellEnv.
	Argv        []string
	CellTimeout time.Duration
	// Tmp holds the stored cluster (removed after).
	Tmp  string
	Logf func(string, ...any)
}

// RunKV runs the KV CORDS sweep: a stored 3-replica cluster, then one
// child process per (file kind, fault) of replica n1.
func RunKV(ctx context.Context, o KVOptions) ([]KVCell, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("torture: no child command for the KV cells")
	}
	faults := o.Faults
	if faults == nil {
		faults = experiments.KVCordsFaults
	}
	dir, err := os.MkdirTemp(o.Tmp, "torture-kv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, kindOf := experiments.KVCordsBase, bitrot.Kind
	switch o.Store {
	case "":
	case StoreSDF:
		base = experiments.KVFlashCordsBase
		kindOf = func(name string) string { return experiments.KVFlashKind(dir, name) }
	default:
		return nil, fmt.Errorf("torture: unknown KV store %q (want \"\" or %q)", o.Store, StoreSDF)
	}
	files, err := base(ctx, dir, o.Keys, o.Seed)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewSource(o.Seed))
	var out []KVCell
	for _, file := range files {
		kind := kindOf(file)
		for _, fault := range faults {
			seed := rng.Int63()
			if o.Cell != nil && !o.Cell(kind, fault) {
				continue
			}
			p := CellParams{Dir: dir, File: file, Fault: fault, Keys: o.Keys, Seed: seed, Store: o.Store}
			c := runChild(ctx, o.Argv, p, o.CellTimeout)
			c.Kind = kind
			if o.Logf != nil {
				o.Logf("cords kv%s %-22s %-14s %-27s %s (%v)", o.Store, kind, fault, c.Outcome, c.Reason, c.Wall.Round(time.Millisecond))
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// runChild runs one cell in a child process and classifies it.
func runChild(ctx context.Context, argv []string, p CellParams, timeout time.Duration) KVCell {
	c := KVCell{Params: p}
	start := time.Now()
	defer func() { c.Wall = time.Since(start) }()
	raw, _ := json.Marshal(p)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), CellEnv+"="+string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	c.Wall = time.Since(start)
	for _, l := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, cellMarker); ok && err == nil {
			if jerr := json.Unmarshal([]byte(rest), &c.Cell); jerr != nil {
				c.Outcome, c.Reason = Crash, "unreadable result: "+jerr.Error()
				return c
			}
			c.Outcome, c.Reason = ClassifyKV(c.Cell, p.Fault == "eio-read-4k" || p.Fault == "write-error")
			return c
		}
	}
	c.Outcome = Crash
	switch {
	case cctx.Err() != nil:
		c.Reason = fmt.Sprintf("hang: killed after %v", timeout)
	default:
		c.Reason = crashLine(stderr.String() + stdout.String())
		if c.Reason == "" {
			c.Reason = fmt.Sprintf("exit: %v", err)
		}
	}
	return c
}

// crashLine picks the line that says why a child died, and where: the
// first frame of the goroutine that panicked outside the runtime.
func crashLine(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "panic:") && !strings.HasPrefix(l, "fatal error:") {
			continue
		}
		for j := i + 1; j+1 < len(lines); j++ {
			if !strings.HasPrefix(lines[j], "goroutine ") || !strings.Contains(lines[j], "[running]") {
				continue
			}
			for k := j + 1; k+1 < len(lines); k += 2 {
				fn := strings.TrimSpace(lines[k])
				if fn == "" {
					break
				}
				if strings.HasPrefix(fn, "panic(") || strings.HasPrefix(fn, "runtime.") {
					continue
				}
				at := strings.TrimSpace(lines[k+1])
				if sp := strings.LastIndex(at, " +0x"); sp > 0 {
					at = at[:sp]
				}
				return fmt.Sprintf("%s at %s (%s)", l, fn, at)
			}
			break
		}
		return l
	}
	return lastLines(s, 1)
}
