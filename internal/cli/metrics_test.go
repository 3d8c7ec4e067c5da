package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/dashboard"
)

// scrape reads url and parses the Prometheus text exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse the exposition of %s: %v\n%s", url, err, body)
	}
	return fams
}

// sum adds the values of a family's samples whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var total float64
	for _, m := range f.Metric {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitMetrics scrapes url until ok holds (deadline 90s: the machine is
// shared and slow).
func waitMetrics(t *testing.T, url, what string, ok func(map[string]*dto.MetricFamily) bool) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		fams := scrape(t, url)
		if ok(fams) {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics: %s did not happen", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDevMetrics runs `flashmend dev`, finds its metrics endpoint in its
// output, scrapes and parses it, and checks that corruption a get repairs
// shows: the node's persistent error and chunk repair counters move, as do
// the request counters of the reads.
func TestDevMetrics(t *testing.T) {
	dir := t.TempDir()
	o := devOptions{dir: dir, nodes: 6, store: "sdf", readMode: "direct", maxObject: base.MiB, deviceSize: 64 * base.MiB,
		kv: true, kvSplits: "g,n,t"}
	o.scrub.off = true
	o.metrics.addr = "127.0.0.1:0"
	o.s3 = s3Flags{addr: "127.0.0.1:0", accessKey: devS3AccessKey, secretKey: devS3SecretKey}
	o.dashboard.addr = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *devcluster.Cluster, 1)
	done := make(chan error, 1)
	var out lockedBuffer
	go func() { done <- runDev(ctx, o, &out, io.Discard, func(c *devcluster.Cluster) { ready <- c }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("dev: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	var url string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "metrics: "); ok {
			if url != "" {
				t.Fatalf("two metrics lines:\n%s", out.String())
			}
			url = u
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("no 'metrics: http://HOST:PORT/metrics' line in dev's output:\n%s", out.String())
	}
	// The S3 gateway's line: its URL and credential; an unsigned request
	// is refused with S3's error document.
	s3Line := regexp.MustCompile(`(?m)^S3: (http://127\.0\.0\.1:\d+) access key: (\S+) secret key: (\S+)$`).FindStringSubmatch(out.String())
	if s3Line == nil || s3Line[2] != devS3AccessKey || s3Line[3] != devS3SecretKey {
		t.Fatalf("no 'S3: http://HOST:PORT access key: AK secret key: SK' line in dev's output:\n%s", out.String())
	}
	resp, err := http.Get(s3Line[1] + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>AccessDenied</Code>") {
		t.Fatalf("unsigned S3 request: %s %s", resp.Status, body)
	}
	epBytes, err := os.ReadFile(filepath.Join(dir, "endpoint"))
	if err != nil {
		t.Fatal(err)
	}
	ep := strings.TrimSpace(string(epBytes))
	ctl := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"ctl", "--endpoint", ep}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("ctl %v: exit %d: %s %s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}

	// Every node's wear, per die, and each KV shard's raft state: one
	// leader per shard once the replicas have elected.
	fams := waitMetrics(t, url, "one raft leader per KV shard", func(f map[string]*dto.MetricFamily) bool {
		for _, shard := range []string{"1", "2", "3", "4"} {
			if sum(f, "flashmend_kv_raft_leader", map[string]string{"shard": shard}) != 1 {
				return false
			}
		}
		return true
	})
	for _, name := range []string{"flashmend_die_erases_total", "flashmend_device_capacity_bytes", "flashmend_repairs_total",
		"flashmend_read_errors_total", "flashmend_device_failed_dies", "flashmend_device_degraded", "flashmend_kv_raft_applied_index", "flashmend_kv_corruptions_total", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("no %s in the scrape", name)
		}
	}
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		if n := len(seriesOf(fams, "flashmend_die_erases_total", map[string]string{"node": id})); n == 0 {
			t.Errorf("node %s: no per-die erase counts", id)
		}
	}
	// flashmend's names follow Prometheus's conventions (units, _total
	// on counters, no type suffixes in gauges): promlint, the checks
	// Prometheus's own tooling runs.
	var ours []*dto.MetricFamily
	for name, f := range fams {
		if strings.HasPrefix(name, "flashmend_") {
			ours = append(ours, f)
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if got := fams["flashmend_repairs_total"].GetType(); got != dto.MetricType_COUNTER {
		t.Errorf("flashmend_repairs_total is a %v", got)
	}

	data := bytes.Repeat([]byte("metrics "), 20000)
	file := filepath.Join(t.TempDir(), "obj")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctl("put", "m/a", file)
	before := scrape(t, url)
	chunk := map[string]string{"kind": "chunk"}
	persistent := map[string]string{"class": "persistent"}
	reads := map[string]string{"op": "Node/ReadChunk"}
	ctl("corrupt", "m/a", "--replica", "0", "--offset", "100", "--bits", "3")
	if got := ctl("get", "m/a"); got != string(data) {
		t.Fatalf("get after corrupt: %d bytes, want %d", len(got), len(data))
	}
	after := waitMetrics(t, url, "the get's repair counted", func(f map[string]*dto.MetricFamily) bool {
		return sum(f, "flashmend_repairs_total", chunk) > sum(before, "flashmend_repairs_total", chunk)
	})
	if b, a := sum(before, "flashmend_read_errors_total", persistent), sum(after, "flashmend_read_errors_total", persistent); a <= b {
		t.Errorf("persistent read errors %v -> %v after a corrupt replica was read", b, a)
	}
	if b, a := sum(before, "flashmend_request_duration_seconds", reads), sum(after, "flashmend_request_duration_seconds", reads); a <= b {
		t.Errorf("Node/ReadChunk requests %v -> %v after a get", b, a)
	}
	if a := sum(after, "flashmend_request_bytes_total", map[string]string{"op": "Node/WriteChunks", "direction": "in"}); a < float64(len(data)) {
		t.Errorf("Node/WriteChunks request bytes %v, want at least the %d put", a, len(data))
	}
	t.Logf("chunk repairs %v -> %v", sum(before, "flashmend_repairs_total", chunk), sum(after, "flashmend_repairs_total", chunk))

	// The dashboard's line, page and feed; a replica corrupted under an
	// S3 object is invisible to an S3 GET (minio-go, unchanged) and
	// visible in the dashboard's feed and on /metrics.
	dash := regexp.MustCompile(`(?m)^dashboard: (http://127\.0\.0\.1:\d+/)$`).FindStringSubmatch(out.String())
	if dash == nil {
		t.Fatalf("no 'dashboard: http://HOST:PORT/' line in dev's output:\n%s", out.String())
	}
	if page := httpGet(t, dash[1]); !strings.Contains(page, "<title>flashmend dashboard</title>") {
		t.Fatalf("dashboard page: %q", page)
	}
	mc, err := minio.New(strings.TrimPrefix(s3Line[1], "http://"), &minio.Options{Creds: credentials.NewStaticV4(s3Line[2], s3Line[3], ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "dash", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, "dash", "obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	feedBefore := dashboardState(t, dash[1])
	before = scrape(t, url)
	ctl("corrupt", "s3/dash/obj", "--replica", "0", "--offset", "5000", "--bits", "2")
	obj, err := mc.GetObject(ctx, "dash", "obj", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("S3 GET of an object with a corrupted replica: %d bytes (%v)", len(got), err)
	}
	waitMetrics(t, url, "the S3 GET's repair counted", func(f map[string]*dto.MetricFamily) bool {
		return sum(f, "flashmend_repairs_total", chunk) > sum(before, "flashmend_repairs_total", chunk)
	})
	feedAfter := dashboardState(t, dash[1])
	if feedAfter.Totals.Repairs <= feedBefore.Totals.Repairs || feedAfter.Totals.ReadErrors <= feedBefore.Totals.ReadErrors {
		t.Fatalf("dashboard feed: repairs %v -> %v, read errors %v -> %v after an S3 GET repaired a replica",
			feedBefore.Totals.Repairs, feedAfter.Totals.Repairs, feedBefore.Totals.ReadErrors, feedAfter.Totals.ReadErrors)
	}
}

func httpGet(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %v", u, resp.Status, err)
	}
	return string(b)
}

func dashboardState(t *testing.T, base string) dashboard.State {
	t.Helper()
	var st dashboard.State
	if err := json.Unmarshal([]byte(httpGet(t, base+"api/state")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// seriesOf returns a family's samples whose labels include want.
func seriesOf(fams map[string]*dto.MetricFamily, name string, want map[string]string) []string {
	var out []string
	if f := fams[name]; f != nil {
		for _, m := range f.Metric {
			if hasLabels(m, want) {
				out = append(out, fmt.Sprint(m.Label))
			}
		}
	}
	return out
}
