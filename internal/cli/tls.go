package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/tlsconf"
)

// The TLS flags (internal/tlsconf). Servers (node, coordinator, dev) take
// --tls-cert, --tls-key, --tls-ca and --tls-client-auth; like every flag of
// theirs, these may come from the config file or FLASHMEND_<COMMAND>_TLS_*.
// Clients (ctl, kv, bench) take --tls-ca, --tls-cert and --tls-key, or the
// variables below, shared by every client command.
const (
	tlsCAEnv   = "FLASHMEND_TLS_CA"
	tlsCertEnv = "FLASHMEND_TLS_CERT"
	tlsKeyEnv  = "FLASHMEND_TLS_KEY"
)

// serverTLSFlags are a server's TLS flags.
type serverTLSFlags struct{ files tlsconf.Files }

// register adds the flags; clientAuth adds --tls-client-auth (servers of
// gRPC: node, coordinator, dev).
func (s *serverTLSFlags) register(f *pflag.FlagSet, clientAuth bool) {
	f.StringVar(&s.files.CertFile, "tls-cert", "", "TLS: this process's certificate (PEM); with it, its servers speak TLS only (flashmend certs writes a dev CA and certificates)")
	f.StringVar(&s.files.KeyFile, "tls-key", "", "TLS: the certificate's private key (PEM)")
	f.StringVar(&s.files.CAFile, "tls-ca", "", "TLS: the CA that signs the cluster's certificates (PEM), to verify the servers this process connects to and, with --tls-client-auth, its clients")
	if clientAuth {
		f.BoolVar(&s.files.ClientAuth, "tls-client-auth", false, "TLS: require every client to present a certificate signed by --tls-ca (mutual TLS)")
	}
}

// load checks and loads the files; nil without any (plaintext).
func (s *serverTLSFlags) load() (*tlsconf.Config, error) { return tlsconf.Load(s.files, time.Now()) }

// clientTLSFlags are a client command's TLS flags.
type clientTLSFlags struct{ files tlsconf.Files }

func (c *clientTLSFlags) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.files.CAFile, "tls-ca", "", "TLS: connect over TLS, verifying the cluster's certificates against this CA (PEM; default $"+tlsCAEnv+")")
	f.StringVar(&c.files.CertFile, "tls-cert", "", "TLS: this client's certificate, for a cluster that requires one (mutual TLS; default $"+tlsCertEnv+")")
	f.StringVar(&c.files.KeyFile, "tls-key", "", "TLS: the client certificate's private key (default $"+tlsKeyEnv+")")
}

// load returns the client's TLS setup: the flags, else the environment;
// nil (plaintext) without either.
func (c *clientTLSFlags) load() (*tlsconf.Config, error) {
	if c == nil {
		return nil, nil
	}
	f := c.files
	for _, v := range []struct {
		field *string
		env   string
	}{{&f.CAFile, tlsCAEnv}, {&f.CertFile, tlsCertEnv}, {&f.KeyFile, tlsKeyEnv}} {
		if *v.field == "" {
			*v.field = os.Getenv(v.env)
		}
	}
	return tlsconf.Load(f, time.Now())
}

// tlsNote is what a server's start line says about TLS.
func tlsNote(tc *tlsconf.Config) string {
	switch {
	case tc == nil:
		return ""
	case tc.Files().ClientAuth:
		return " over TLS, client certificates required"
	}
	return " over TLS"
}
