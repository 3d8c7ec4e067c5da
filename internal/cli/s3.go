package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/client"
	"github.com/flashmend/flashmend/internal/kv/kvclient"
	"github.com/flashmend/flashmend/internal/metrics"
	"github.com/flashmend/flashmend/internal/s3"
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
// it. Off: a no-op stop.
func (s *s3Flags) start(ctx context.Context, endpoint string, reg *metrics.Registry, out, errOut io.Writer, logf func(string, ...any)) (stop func(), err error) {
	if s.addr == "off" || s.addr == "" {
		return func() {}, nil
	}
	copts := client.Options{Logf: logf}
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
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(errOut, "s3 gateway: %v\n", err)
		}
	}()
	fmt.Fprintf(out, "S3: http://%s access key: %s secret key: %s\n", lis.Addr(), s.accessKey, s.secretKey)
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
