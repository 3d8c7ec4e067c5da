package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/client/devcluster"
	"github.com/flashmend/flashmend/internal/gen/objectpb"
	"github.com/flashmend/flashmend/internal/metrics"
	"github.com/flashmend/flashmend/internal/objstore"
)

// chromiumPath finds Debian's chromium (`make chromium` installs it with
// apt-get); the browser test skips, saying why, only when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed and could not be (make chromium installs it with apt-get as root): the dashboard's browser test needs it")
	return ""
}

// startCluster runs a dev cluster on emulated flash with a metrics
// registry, and the dashboard over it.
func startCluster(t *testing.T) (url string, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	reg := metrics.New()
	cl, err := devcluster.Start(ctx, devcluster.Options{Dir: t.TempDir(), UnsafeNoFsync: true, Metrics: reg, MaxObjectBytes: 8 << 20,
		NodeStore: func(dir string, i int) (objstore.Store, error) {
			return objstore.OpenSDFStore(filepath.Join(dir, "sdf"), objstore.SDFStoreOptions{Seed: int64(i + 1)})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	c, err = client.Dial(ctx, cl.Endpoint(), reg.ClientOptions(client.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d, err := New(Options{Gatherer: reg.Gatherer(), ObjectMix: ObjectMixOf(c)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv.URL, c
}

// pageNumber reads a number the page shows (fmt in app.js: plain below
// 10,000).
func pageNumber(ctx context.Context, id string) (int, error) {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("document.getElementById(%q).textContent", id)))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(s))
}

// TestDashboardInChromium loads the dashboard in a real headless Chromium
// against a running cluster, checks that the numbers it shows change after
// a replica is corrupted and the object read (the read finds the damage and
// repairs it), and saves a screenshot (FLASHMEND_DASHBOARD_SCREENSHOT=PATH
// to keep it, as docs/dashboard.png is made).
func TestDashboardInChromium(t *testing.T) {
	chromium := chromiumPath(t)
	url, c := startCluster(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()

	// Some data: REP and EC objects.
	data := make([]byte, 300_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := 0; i < 6; i++ {
		red := objectpb.Redundancy_REP
		if i%3 == 2 {
			red = objectpb.Redundancy_EC
		}
		if _, err := c.Put(ctx, "obj"+strconv.Itoa(i), data, red); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("#nodes .node")); err != nil {
		t.Fatalf("load the dashboard in chromium: %v", err)
	}
	waitFor := func(what string, cond func() (bool, error)) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			ok, err := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s (last error %v)", what, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("the object mix 4 / 2", func() (bool, error) {
		objects, err := chromedp.Run(ctx, chromedp.Text("#objects"))
		return strings.TrimSpace(objects) == "4 / 2", err
	})
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#nodes .node").length`))
	if err != nil || nodes != 6 {
		t.Fatalf("cluster map shows %d nodes (%v), want 6", nodes, err)
	}
	repairs0, err := pageNumber(ctx, "total-repairs")
	if err != nil {
		t.Fatal(err)
	}
	errors0, err := pageNumber(ctx, "total-read-errors")
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt one replica's bytes; a read finds the damage, serves the good
	// bytes and rewrites the bad ones.
	if err := c.Corrupt(ctx, "obj0", 0, 1000, 3); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "obj0")
	if err != nil || string(got) != string(data) {
		t.Fatalf("read of the corrupted object: %v", err)
	}
	c.WaitBackground()
	waitFor("more repairs and read errors", func() (bool, error) {
		r, err1 := pageNumber(ctx, "total-repairs")
		e, err2 := pageNumber(ctx, "total-read-errors")
		return r > repairs0 && e > errors0, errors.Join(err1, err2)
	})
	if kinds, err := chromedp.Run(ctx, chromedp.Text("#kinds")); err != nil || !strings.Contains(kinds, "chunk") {
		t.Fatalf("repairs by kind: %q (%v)", kinds, err)
	}
	// Let the rate chart draw a few points, then take the picture.
	if err := chromedp.Do(ctx, chromedp.Sleep(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100 /* PNG */))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "dashboard.png")
	if p := os.Getenv("FLASHMEND_DASHBOARD_SCREENSHOT"); p != "" {
		out = p
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%d bytes) in %s", len(png), out)
}
