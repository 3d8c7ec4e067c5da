package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/coord"
	"github.com/flashmend/flashmend/internal/netfault"
)

// newCoordinatorCmd is `flashmend coordinator`: membership, placement and
// the object index on etcd (internal/coord), plus the background scrubber.
func newCoordinatorCmd() *cobra.Command {
	var cfg coord.Config
	var etcd string
	var maxObject = base.GiB
	var scrub scrubFlags
	var start startFlags
	var wearF wearFlags
	var metricsF metricsFlag
	var tlsF serverTLSFlags
	var advertise string
	var dash dashboardFlag
	var nemesisName bool
	cmd := &cobra.Command{
		Use:   "coordinator --dir DIR",
		Short: "Run the coordinator (embedded etcd by default)",
		Long: `Runs the coordinator: membership and liveness (node leases in etcd), placement
by FNV-1a consistent hashing, the object index and the mapping table. etcd is
embedded (single member, data in DIR/etcd, ports chosen at run time) unless
--etcd names an external cluster. It listens on 127.0.0.1 at a port chosen the
first time and kept for later runs on the same DIR (unless --listen says
otherwise), and writes its address to DIR/endpoint while it runs. Only one
flashmend may run on a DIR. Ctrl-C (or SIGTERM) stops it and exits 0.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Dir == "" {
				return base.InvalidArgumentf("--dir is required")
			}
			if etcd != "" {
				cfg.EtcdEndpoints = strings.Split(etcd, ",")
			}
			cfg.MaxObjectBytes = maxObject
			tc, err := tlsF.load()
			if err != nil {
				return err
			}
			cfg.TLS = tc
			cfg.Wear = wearF.config()
			if nemesisName {
				cfg.NodeDialOptions = netfault.Naming(netfault.Coordinator)
			}
			cfg.Logf = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			ctx, stop := signalContext()
			defer stop()
			lock, err := lockDir(cfg.Dir)
			if err != nil {
				return err
			}
			defer lock.Close()
			if err := removeEndpoint(cfg.Dir); err != nil {
				return err
			}
			startCtx, cancel := start.startContext(ctx)
			c, err := coord.Start(startCtx, cfg)
			if err != nil {
				err = startError(startCtx, err)
				cancel()
				return err
			}
			cancel()
			defer c.Close()
			// The address clients dial: what it advertises, else its
			// listener's.
			endpoint, err := advertisedEndpoint(advertise, c.Addr())
			if err != nil {
				return err
			}
			if err := writeEndpoint(cfg.Dir, endpoint); err != nil {
				return err
			}
			defer func() {
				if err := removeEndpoint(cfg.Dir); err != nil {
					cfg.Logf("coordinator: %v", err)
				}
			}()
			fmt.Fprintf(cmd.OutOrStdout(), "coordinator of cluster %s serving on %s%s (etcd %s)\n",
				c.ClusterID(), endpoint, tlsNote(tc), strings.Join(c.EtcdEndpoints(), ","))
			reg, stopMetrics, err := metricsF.start(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stopMetrics()
			copts := client.Options{Logf: cfg.Logf, TLS: tc, NodeDialOptions: cfg.NodeDialOptions}
			if reg != nil {
				// The scrubber's repairs go through this client.
				copts = reg.ClientOptions(copts)
			}
			cli, err := client.Dial(ctx, endpoint, copts)
			if err != nil {
				return err
			}
			defer cli.Close()
			// The dashboard shows the whole cluster: this process's
			// figures (the scrubber's) and every live node's.
			stopDashboard, err := dash.start(ctx, reg, true, endpoint, tc, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "dashboard not started: %v\n", err)
				stopDashboard = func() {}
			}
			defer stopDashboard()
			moverCtx, stopMover := context.WithCancel(ctx)
			moverDone := make(chan struct{})
			go func() {
				defer close(moverDone)
				wearF.runMover(moverCtx, cli, cfg.Logf)
			}()
			defer func() {
				stopMover()
				<-moverDone
			}()
			if scrub.off {
				<-ctx.Done()
				return nil
			}
			s, err := client.NewScrubber(cli, scrub.options())
			if err != nil {
				return err
			}
			if reg != nil {
				if err := reg.AddScrubber(func() *client.Scrubber { return s }); err != nil {
					return err
				}
			}
			if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "dir", "", "data directory (embedded etcd)")
	f.StringVar(&cfg.ListenAddr, "listen", "", "gRPC listen address (default: 127.0.0.1 on the port DIR remembers)")
	f.StringVar(&advertise, "advertise", "", "the address clients dial, HOST or HOST:PORT, written to DIR/endpoint (default: --listen's; set it when listening on 0.0.0.0, or to a name its TLS certificate carries)")
	f.StringVar(&etcd, "etcd", "", "external etcd endpoints, comma-separated (default: embedded)")
	f.Int64Var(&cfg.LeaseTTLSeconds, "lease-ttl-seconds", 5, "node liveness lease")
	f.Var(&maxObject, "max-object", "largest object accepted")
	f.BoolVar(&nemesisName, "nemesis", false, "reliability harness only: name the coordinator on its calls to nodes, so that a node's partition switch (internal/netfault) can cut it off")
	_ = f.MarkHidden("nemesis")
	f.StringVar(&cfg.ReadMode, "read-mode", coord.ReadModeDirect, "cluster read mode: direct or hdfs (baseline)")
	f.IntVar(&cfg.EtcdMembers, "etcd-members", 1,
		"embedded etcd members (1, 3 or 5: with more than one, a member whose store is damaged or lost is replaced from the others; they share this process)")
	f.BoolVar(&cfg.KeepDamagedStore, "keep-damaged-store", false,
		"refuse to start on a damaged embedded etcd store instead of setting it aside and rebuilding the index from the nodes")
	scrub.register(cmd, 10*time.Minute)
	start.register(cmd)
	wearF.register(cmd)
	metricsF.register(f)
	dash.register(f)
	tlsF.register(f, true)
	return configurable(cmd, nil)
}

// scrubFlags are the background scrubber's flags.
type scrubFlags struct {
	off                bool
	scrubRate, repRate base.Bytes
	reprotectAfter     time.Duration
}

// register adds the flags; reprotectAfter is the default wait before a
// down node's data is re-created elsewhere.
func (s *scrubFlags) register(cmd *cobra.Command, reprotectAfter time.Duration) {
	s.scrubRate, s.repRate = 16*base.MiB, 4*base.MiB
	cmd.Flags().BoolVar(&s.off, "no-scrub", false, "do not run the background scrubber")
	cmd.Flags().Var(&s.scrubRate, "scrub-rate", "scrubber verification budget per second")
	cmd.Flags().Var(&s.repRate, "repair-rate", "scrubber repair budget per second")
	cmd.Flags().DurationVar(&s.reprotectAfter, "reprotect-after", reprotectAfter,
		"re-create a down node's replicas and shards on other nodes once it has been down this long (negative: never)")
}

func (s *scrubFlags) options() client.ScrubberOptions {
	return client.ScrubberOptions{ScrubBytesPerSecond: s.scrubRate, RepairBytesPerSecond: s.repRate, ReprotectAfter: s.reprotectAfter}
}

// advertisedEndpoint is the address a server's clients dial: adv (a host
// alone takes the listener's port), else the listener's address.
func advertisedEndpoint(adv, listening string) (string, error) {
	if adv == "" {
		return listening, nil
	}
	_, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	host, advPort, err := net.SplitHostPort(adv)
	if err != nil {
		host, advPort = strings.Trim(adv, "[]"), "" // a host alone
	}
	if host == "" {
		return "", base.InvalidArgumentf("--advertise %q has no host", adv)
	}
	if advPort == "" || advPort == "0" {
		advPort = port
	}
	return net.JoinHostPort(host, advPort), nil
}
