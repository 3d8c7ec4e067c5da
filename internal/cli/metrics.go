package cli

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/metrics"
)

// metricsFlag is --metrics: where a process serves its Prometheus metrics.
type metricsFlag struct{ addr string }

func (m *metricsFlag) register(f *pflag.FlagSet) {
	f.StringVar(&m.addr, "metrics", "127.0.0.1:0",
		`address for the Prometheus metrics endpoint (http://ADDR/metrics; port 0: chosen at start; "off": none)`)
}

// start returns the process's registry and starts its endpoint, printing
// "metrics: URL" on out (scripts find it there); stop ends it and says on
// errOut if that failed. Off: a nil registry and a no-op stop.
func (m *metricsFlag) start(out, errOut io.Writer) (reg *metrics.Registry, stop func(), err error) {
	if m.addr == "off" || m.addr == "" {
		return nil, func() {}, nil
	}
	reg = metrics.New()
	srv, err := reg.Serve(m.addr)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(out, "metrics: %s\n", srv.URL())
	return reg, func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(errOut, "metrics: %v\n", err)
		}
	}, nil
}
