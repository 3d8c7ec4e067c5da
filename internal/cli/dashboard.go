package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/dashboard"
	"github.com/flashmend/flashmend/internal/metrics"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// dashboardFlag is --dashboard: where a process serves its web dashboard.
type dashboardFlag struct{ addr string }

func (d *dashboardFlag) register(f *pflag.FlagSet) {
	f.StringVar(&d.addr, "dashboard", "127.0.0.1:0",
		`address of the web dashboard (http://ADDR/; port 0: chosen at start; "off": none)`)
}

// start serves the dashboard over the cluster at endpoint and prints its
// line ("dashboard: http://HOST:PORT/"); stop ends it. Its figures are
// reg's (dev: the nodes run in this process) or, with federate, reg's and
// those every live node serves over gRPC (coordinator: metrics.Federation).
// Off: a no-op stop.
func (d *dashboardFlag) start(ctx context.Context, reg *metrics.Registry, federate bool, endpoint string, tc *tlsconf.Config,
	out, errOut io.Writer) (stop func(), err error) {
	if d.addr == "off" || d.addr == "" {
		return func() {}, nil
	}
	var local prometheus.Gatherer
	switch {
	case reg != nil:
		local = reg.Gatherer()
	case federate:
		local = prometheus.NewRegistry() // the nodes' figures only
	default:
		return nil, errors.New("the dashboard shows the process's metrics: it needs --metrics")
	}
	c, err := client.Dial(ctx, endpoint, client.Options{TLS: tc})
	if err != nil {
		return nil, err
	}
	gatherer := local
	closeGatherer := func() error { return nil }
	if federate {
		fed := metrics.NewFederation(local, c.Nodes, tc)
		gatherer, closeGatherer = fed, fed.Close
	}
	dash, err := dashboard.New(dashboard.Options{Gatherer: gatherer, ObjectMix: dashboard.ObjectMixOf(c)})
	if err != nil {
		c.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", d.addr)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("dashboard: listen on %q: %w", d.addr, err)
	}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(errOut, "dashboard: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "dashboard: http://%s/\n", lis.Addr())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			fmt.Fprintf(errOut, "dashboard: %v\n", err)
		}
		<-done
		if err := closeGatherer(); err != nil {
			fmt.Fprintf(errOut, "dashboard: %v\n", err)
		}
		c.Close()
	}, nil
}
