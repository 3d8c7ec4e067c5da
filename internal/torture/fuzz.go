package torture

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FuzzTarget is one Go native fuzz target: its package (relative to the
// module root) and function name.
type FuzzTarget struct {
	Pkg, Name string
	// What names the decoder it exercises.
	What string
}

// FuzzTargets are every fuzz target of the tree (TestFuzzTargetsListed
// keeps the list complete).
var FuzzTargets = []FuzzTarget{
	{"./internal/objstore/sumsrec", "FuzzDecodeSums", "chunk sums records"},
	{"./internal/objstore", "FuzzMetaFiles", "three-copy metadata files (identity, local index entries)"},
	{"./internal/objstore/filestore", "FuzzPackLoad", "plain-file pack files (a blob's chunk data and sums files)"},
	{"./internal/raftlog", "FuzzDecodeRecord", "raft log records"},
	{"./internal/raftlog", "FuzzParseCopies", "raft log fragments across two copies"},
	{"./internal/guardfs", "FuzzMergeFrames", "guardfs frames across copies"},
	{"./internal/guardfs", "FuzzDecodeSidecar", "guardfs sstable sidecars"},
	{"./internal/sdf/onflash", "FuzzOOB", "SDF data page OOB"},
	{"./internal/sdf/onflash", "FuzzP2L", "SDF P2L pages"},
	{"./internal/sdf/onflash", "FuzzMetaPage", "SDF metadata journal pages and unit votes"},
	{"./internal/sdf/onflash", "FuzzRecords", "SDF journal records"},
	{"./internal/sdf", "FuzzJournalReplay", "SDF journal replay and zone table rebuild"},
	{"./internal/node", "FuzzWriteChunkRequest", "WriteChunk requests off the wire"},
	{"./internal/node", "FuzzIdentityFile", "node identity file"},
	{"./internal/wire", "FuzzStatusClasses", "error classes across gRPC"},
	{"./internal/s3", "FuzzParseRange", "S3 Range header"},
	{"./internal/s3", "FuzzParseAuthorization", "S3 SigV4 Authorization header"},
	{"./internal/s3", "FuzzSigV4", "S3 SigV4 signature check"},
	{"./internal/s3", "FuzzParseCopySource", "S3 x-amz-copy-source"},
	{"./internal/s3", "FuzzParsePartNumber", "S3 part numbers"},
	{"./internal/s3", "FuzzXMLBodies", "S3 CompleteMultipartUpload and DeleteObjects bodies"},
	{"./internal/wire", "FuzzUnmarshalChunks", "streamed chunk reads (hand-coded ReadChunksResponse against protobuf's decoding)"},
	{"./internal/wire", "FuzzUnmarshalChunkWrite", "streamed chunk writes (WriteChunkRequest received into a pooled buffer against protobuf's decoding)"},
}

// FuzzResult is what fuzzing one target found.
type FuzzResult struct {
	Target FuzzTarget
	Time   time.Duration // fuzzing time asked for
	Wall   time.Duration // including the instrumented build
	Execs  int64
	New    int64 // new corpus entries found (in the Go build cache)
	Failed bool
	// Failure is the failing input's path and the failure, if any.
	Failure string
}

var (
	execsRe   = regexp.MustCompile(`execs: (\d+)`)
	newRe     = regexp.MustCompile(`new interesting: (\d+)`)
	failingRe = regexp.MustCompile(`Failing input written to (\S+)`)
)

// Fuzz runs `go test -fuzz` on each target for d, one at a time (parallel
// workers each), in the module root dir.
func Fuzz(ctx context.Context, dir string, targets []FuzzTarget, d time.Duration, parallel int, logf func(string, ...any)) []FuzzResult {
	var out []FuzzResult
	for _, t := range targets {
		start := time.Now()
		// NB: -fuzzminimizetime bounds the minimization of each new
		// corpus entry (60 s by default), which can otherwise take the
		// whole fuzzing time of a target with large inputs.
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+t.Name+"$", "-fuzztime", d.String(),
			"-fuzzminimizetime", "2s", "-parallel", strconv.Itoa(parallel), t.Pkg)
		cmd.Dir = dir
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Run()
		r := parseFuzzOutput(buf.String())
		r.Target, r.Time, r.Wall = t, d, time.Since(start)
		if err != nil && !r.Failed {
			r.Failed, r.Failure = true, lastLines(buf.String(), 5)
		}
		logf("fuzz %s %s: %d execs, %d new, failed=%v %s", t.Pkg, t.Name, r.Execs, r.New, r.Failed, r.Failure)
		out = append(out, r)
	}
	return out
}

func parseFuzzOutput(s string) FuzzResult {
	var r FuzzResult
	if m := execsRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		r.Execs, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
	}
	if m := newRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		r.New, _ = strconv.ParseInt(m[len(m)-1][1], 10, 64)
	}
	if m := failingRe.FindStringSubmatch(s); m != nil {
		r.Failed = true
		r.Failure = m[1] + ": " + firstFailure(s)
	}
	return r
}

func firstFailure(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "_test.go:") || strings.HasPrefix(l, "panic:") {
			return l
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return fmt.Sprint(strings.Join(ls, " | "))
}
