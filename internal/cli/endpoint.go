package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/dirlock"
)

// devDir is where `make run` keeps its dev cluster, relative to the
// repository root; ctl looks for DEVDIR/endpoint in the working directory
// and its parents when neither --endpoint nor FLASHMEND_ENDPOINT is set.
const devDir = ".flashmend/dev"

// endpoint is a cluster endpoint and where ctl found it.
type endpoint struct {
	addr string
	// from says where addr came from, for error messages.
	from string
	// dir is the data directory whose endpoint file named addr ("" when
	// the endpoint came from a flag or the environment).
	dir string
}

// resolveEndpoint picks the endpoint: the flag, then the environment, then
// the endpoint file of the nearest .flashmend/dev.
func resolveEndpoint(flag string) (endpoint, error) {
	if flag != "" {
		return endpoint{addr: flag, from: "--endpoint"}, nil
	}
	if env := os.Getenv(EndpointEnv); env != "" {
		return endpoint{addr: env, from: "$" + EndpointEnv}, nil
	}
	dir, err := findDevDir()
	if err != nil {
		return endpoint{}, err
	}
	addr, err := readEndpoint(dir)
	if errors.Is(err, os.ErrNotExist) {
		return endpoint{}, fmt.Errorf("no flashmend runs on %s (it has no endpoint file): start it with 'make run' or 'flashmend dev --dir %s', or pass --endpoint", dir, dir)
	}
	if err != nil {
		return endpoint{}, err
	}
	return endpoint{addr: addr, from: filepath.Join(dir, endpointFile), dir: dir}, nil
}

// findDevDir returns the nearest .flashmend/dev in the working directory
// or its parents.
func findDevDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, devDir)
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			if rel, err := filepath.Rel(wd, cand); err == nil {
				return rel, nil
			}
			return cand, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", base.InvalidArgumentf("no endpoint: pass --endpoint ADDR, set %s, or run ctl under the directory where 'make run' keeps %s", EndpointEnv, devDir)
}

// unreachable says, in one line, that nothing answered at the endpoint and
// what to check.
func (e endpoint) unreachable(err *client.UnreachableError) error {
	if err.TLS {
		return fmt.Errorf("%v (endpoint from %s)", err, e.from)
	}
	if e.dir != "" {
		if pid, held := dirlock.Holder(e.dir); held {
			return fmt.Errorf("%v (from %s; flashmend pid %d holds %s: is it still starting?)", err, e.from, pid, e.dir)
		}
		return fmt.Errorf("%v (from %s, left by a flashmend that is no longer running: start it again with 'make run')", err, e.from)
	}
	return fmt.Errorf("%v (from %s): check that the cluster runs ('make run' or 'flashmend dev') and that %s names its endpoint", err, e.from, e.from)
}
