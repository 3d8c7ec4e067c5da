package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/metrics"
	"github.com/flashmend/flashmend/internal/s3"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// s3Flags are the S3 gateway's flags.
type s3Flags struct {
	addr, accessKey, secretKey string
}

// The dev cluster's default credential: a dev cluster listens on loopback
// only; set your own with --s3-access-key and --s3-secret-key.
const (
	devS3AccessKey = "flashmend"
	devS3SecretKey = "flashmend-dev-secret"
)

func (s *s3Flags) register(f *pflag.FlagSet) {
	f.StringVar(&s.addr, "s3", "127.0.0.1:0", `address of the S3 gateway (port 0: chosen at start; "off": none)`)
	f.StringVar(&s.accessKey, "s3-access-key", devS3AccessKey, "the S3 gateway's access key")
	f.StringVar(&s.secretKey, "s3-secret-key", devS3SecretKey, "the S3 gateway's secret key")
}

// start serves the gateway over the cluster at endpoint (its client's
// repairs recorded in reg, when set) and prints its
// line ("S3: http://HOST:PORT access key: AK secret key: SK"); stop ends
// it. clusterTLS secures the connections to the cluster, serveTLS (with a
// certificate) makes the gateway serve HTTPS; nil: plaintext. Off: a
// no-op stop.
func (s *s3Flags) start(ctx context.Context, endpoint string, clusterTLS, serveTLS *tlsconf.Config, reg *metrics.Registry,
	out, errOut io.Writer, logf func(string, ...any)) (stop func(), err error) {
	if s.addr == "off" || s.addr == "" {
		return func() {}, nil
	}
	var httpsConfig *tls.Config
	if serveTLS != nil {
		if httpsConfig, err = serveTLS.ServerTLS(); err != nil {
			return nil, fmt.Errorf("s3 gateway: %w", err)
		}
		// S3 clients authenticate with signatures, not certificates.
		httpsConfig.ClientAuth, httpsConfig.ClientCAs = tls.NoClientCert, nil
	}
	copts := client.Options{Logf: logf, TLS: clusterTLS}
	if reg != nil {
		// The repairs the gateway's reads make are the process's too.
		copts = reg.ClientOptions(copts)
	}
	c, err := client.Dial(ctx, endpoint, copts)
	if err != nil {
		return nil, err
	}
	kvc, err := c.KVClient(ctx, kvclient.Options{})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("s3 gateway (it keeps buckets in the KV store): %w", err)
	}
	gw, err := s3.New(c, kvc, s3.Options{AccessKey: s.accessKey, SecretKey: s.secretKey, Logf: logf})
	if err != nil {
		kvc.Close()
		c.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		kvc.Close()
		c.Close()
		return nil, fmt.Errorf("s3 gateway: listen on %q: %w", s.addr, err)
	}
	scheme := "http"
	if httpsConfig != nil {
		lis, scheme = tls.NewListener(lis, httpsConfig), "https"
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(errOut, "s3 gateway: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "S3: %s://%s access key: %s secret key: %s\n", scheme, lis.Addr(), s.accessKey, s.secretKey)
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			fmt.Fprintf(errOut, "s3 gateway: %v\n", err)
		}
		<-done
		kvc.Close()
		c.Close()
	}, nil
}

// newS3Cmd is `flashmend s3`: the S3 gateway as its own process, in front
// of a cluster whose coordinator runs elsewhere (multi-host deployments;
// `flashmend dev` serves one by itself).
func newS3Cmd() *cobra.Command {
	var s s3Flags
	var endpoint string
	var metricsF metricsFlag
	var tlsF serverTLSFlags
	cmd := &cobra.Command{
		Use:   "s3 --endpoint ADDR --listen ADDR",
		Short: "Serve the S3 gateway over a cluster",
		Long: `Serves the S3-compatible gateway (docs/s3.md) over the cluster whose
coordinator is at --endpoint (or $` + EndpointEnv + `), on --listen, and prints
its line: "S3: http://HOST:PORT access key: AK secret key: SK". The credential
comes from --access-key and --secret-key, or from $FLASHMEND_S3_ACCESS_KEY and
$FLASHMEND_S3_SECRET_KEY (better: not on the command line); there is no
default outside 'flashmend dev'. Buckets and object metadata live in the
cluster's KV store, so any number of gateways may serve the same cluster.
Ctrl-C (or SIGTERM) stops it and exits 0.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The config file and the environment (FLASHMEND_S3_<FLAG>,
			// and $FLASHMEND_ENDPOINT) have filled what the command
			// line left unset (configurable).
			if endpoint == "" {
				return base.InvalidArgumentf("--endpoint (or $%s) is required", EndpointEnv)
			}
			if s.accessKey == "" || s.secretKey == "" {
				return base.InvalidArgumentf("an access key and a secret key are required (--access-key/--secret-key or $FLASHMEND_S3_ACCESS_KEY/$FLASHMEND_S3_SECRET_KEY)")
			}
			tc, err := tlsF.load()
			if err != nil {
				return err
			}
			// With --tls-ca the cluster is reached over TLS; with
			// --tls-cert the gateway serves HTTPS.
			var clusterTLS, serveTLS *tlsconf.Config
			if tlsF.files.CAFile != "" {
				clusterTLS = tc
			}
			if tlsF.files.CertFile != "" {
				serveTLS = tc
			}
			ctx, stop := signalContext()
			defer stop()
			logf := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			reg, stopMetrics, err := metricsF.start(cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stopMetrics()
			stopS3, err := s.start(ctx, endpoint, clusterTLS, serveTLS, reg, cmd.OutOrStdout(), cmd.ErrOrStderr(), logf)
			if err != nil {
				return err
			}
			<-ctx.Done()
			stopS3()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&endpoint, "endpoint", "", "the cluster's coordinator address (default $"+EndpointEnv+")")
	f.StringVar(&s.addr, "listen", "127.0.0.1:0", "address to serve S3 on (port 0: chosen at start)")
	f.StringVar(&s.accessKey, "access-key", "", "the gateway's access key (default $FLASHMEND_S3_ACCESS_KEY)")
	f.StringVar(&s.secretKey, "secret-key", "", "the gateway's secret key (default $FLASHMEND_S3_SECRET_KEY)")
	metricsF.register(f)
	f.StringVar(&tlsF.files.CertFile, "tls-cert", "", "TLS: the gateway's certificate (PEM): it serves HTTPS, and presents it to a cluster that requires client certificates")
	f.StringVar(&tlsF.files.KeyFile, "tls-key", "", "TLS: the certificate's private key (PEM)")
	f.StringVar(&tlsF.files.CAFile, "tls-ca", "", "TLS: the cluster's CA (PEM): with it, the gateway connects to the cluster over TLS")
	return configurable(cmd, map[string][]string{"endpoint": {EndpointEnv}})
}
