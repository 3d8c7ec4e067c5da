package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flashmend/flashmend/internal/base"
)

// Files names the PEM files of one process's TLS identity and trust.
type Files struct {
	// CertFile is this process's certificate (chain), presented by its
	// servers and, for mutual TLS, by its clients.
	CertFile string
	// KeyFile is CertFile's private key.
	KeyFile string
	// CAFile holds the CA certificates that sign the peers' certificates;
	// empty: the system's roots (servers then cannot ask for client
	// certificates).
	CAFile string
	// ClientAuth makes servers require a client certificate signed by
	// CAFile (mutual TLS).
	ClientAuth bool
}

// Enabled reports whether any file is named (TLS is on).
func (f Files) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// Config is a process's loaded TLS setup. A nil *Config is plaintext.
type Config struct {
	files Files
	// cert is the process's identity (nil: a client without one).
	cert *tls.Certificate
	// roots verify peers (nil: the system's roots).
	roots *x509.CertPool
	// leaf is cert's parsed leaf (names, validity).
	leaf *x509.Certificate
	// clientOverride, when set, is the client configuration as a caller
	// gave it (FromClientTLS).
	clientOverride *tls.Config
}

// Load reads and checks the files (see the package doc's failure model);
// it returns nil (plaintext) when f names none. now is the time the
// certificate must be valid at.
func Load(f Files, now time.Time) (*Config, error) {
	if !f.Enabled() {
		if f.ClientAuth {
			return nil, base.InvalidArgumentf("tls: --tls-client-auth needs --tls-ca (the CA client certificates must be signed by) and --tls-cert/--tls-key")
		}
		return nil, nil
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, base.InvalidArgumentf("tls: --tls-cert and --tls-key go together (got cert %q, key %q)", f.CertFile, f.KeyFile)
	}
	if f.ClientAuth && (f.CAFile == "" || f.CertFile == "") {
		return nil, base.InvalidArgumentf("tls: --tls-client-auth needs --tls-ca (the CA client certificates must be signed by) and --tls-cert/--tls-key")
	}
	c := &Config{files: f}
	if f.CAFile != "" {
		pemBytes, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, base.InvalidArgumentf("tls: CA file: %v", err)
		}
		c.roots = x509.NewCertPool()
		n := 0
		for rest := pemBytes; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			ca, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, base.InvalidArgumentf("tls: CA file %s: %v", f.CAFile, err)
			}
			c.roots.AddCert(ca)
			n++
		}
		if n == 0 {
			return nil, base.InvalidArgumentf("tls: CA file %s holds no PEM certificate", f.CAFile)
		}
	}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, base.InvalidArgumentf("tls: certificate %s with key %s: %v", f.CertFile, f.KeyFile, err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, base.InvalidArgumentf("tls: certificate %s: %v", f.CertFile, err)
		}
		if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
			return nil, base.InvalidArgumentf("tls: certificate %s is valid from %s to %s, not now (%s)",
				f.CertFile, leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		if c.roots != nil {
			inter := x509.NewCertPool()
			for _, der := range cert.Certificate[1:] {
				if ic, err := x509.ParseCertificate(der); err == nil {
					inter.AddCert(ic)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.roots, Intermediates: inter, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				return nil, base.InvalidArgumentf("tls: certificate %s does not verify against the CA in %s: %v", f.CertFile, f.CAFile, err)
			}
		}
		cert.Leaf = leaf
		c.cert, c.leaf = &cert, leaf
	}
	return c, nil
}

// Enabled reports whether c is TLS (false for nil: plaintext).
func (c *Config) Enabled() bool { return c != nil }

// Scheme is "https" with TLS, "http" without.
func (c *Config) Scheme() string {
	if c == nil {
		return "http"
	}
	return "https"
}

// Files returns the files c was loaded from.
func (c *Config) Files() Files {
	if c == nil {
		return Files{}
	}
	return c.files
}

// Names returns the names and addresses the certificate is for (for
// messages).
func (c *Config) Names() []string {
	if c == nil || c.leaf == nil {
		return nil
	}
	names := append([]string(nil), c.leaf.DNSNames...)
	for _, ip := range c.leaf.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// ServerTLS is the configuration of a server (HTTPS or gRPC): it needs a
// certificate.
func (c *Config) ServerTLS() (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	if c.cert == nil {
		return nil, base.InvalidArgumentf("tls: a server needs its certificate and key (--tls-cert, --tls-key); --tls-ca alone only verifies servers")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*c.cert}}
	if c.files.ClientAuth {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = c.roots
	}
	return cfg, nil
}

// ClientTLS is the configuration of a client: it verifies servers against
// the CA (or the system's roots) and presents the process's certificate
// when it has one.
func (c *Config) ClientTLS() *tls.Config {
	if c == nil {
		return nil
	}
	if c.clientOverride != nil {
		return c.clientOverride.Clone()
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.roots}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	return cfg
}

// ClientTLSFor is ClientTLS when any of urls is https, else nil: an etcd
// client's configuration (its endpoints say whether etcd speaks TLS).
func (c *Config) ClientTLSFor(urls []string) *tls.Config {
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			return c.ClientTLS()
		}
	}
	return nil
}

// ServerOption returns the gRPC server option of c (none for nil).
func (c *Config) ServerOption() (grpc.ServerOption, error) {
	if c == nil {
		return grpc.EmptyServerOption{}, nil
	}
	cfg, err := c.ServerTLS()
	if err != nil {
		return nil, err
	}
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

// DialOption returns the gRPC dial option of c: TLS, or insecure (plain
// TCP) for nil.
func (c *Config) DialOption() grpc.DialOption {
	if c == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(c.ClientTLS()))
}

// FromClientTLS wraps a caller's own *tls.Config (the public client's
// Options.TLS) for the dial paths; nil stays nil (plaintext).
func FromClientTLS(cfg *tls.Config) *Config {
	if cfg == nil {
		return nil
	}
	return &Config{clientOverride: cfg}
}

// Explain turns a connection error of a client using c (nil: plaintext)
// into one line that says what to change when it is a TLS mismatch; ok is
// false for other errors.
func Explain(c *Config, msg string) (reason string, ok bool) {
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "TLS: the server's certificate is not signed by a CA this client trusts (give the cluster's CA with --tls-ca or $FLASHMEND_TLS_CA)", true
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "TLS: the server does not speak TLS (it runs without --tls-cert): connect without --tls-ca, or start it with TLS", true
	case strings.Contains(msg, "certificate is valid for"), strings.Contains(msg, "certificate is not valid for any names"):
		return "TLS: the server's certificate is not for the address dialled (" + innermost(msg) + "): issue it for that name or address (flashmend certs)", true
	case strings.Contains(msg, "certificate has expired"), strings.Contains(msg, "certificate is not yet valid"):
		return "TLS: " + innermost(msg), true
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		return "TLS: the server requires a client certificate signed by its CA (mutual TLS): pass --tls-cert and --tls-key", true
	case c == nil && (strings.Contains(msg, "error reading server preface") || strings.Contains(msg, "connection closed before server preface received")):
		return "the server closed the connection before it answered: it may require TLS (pass --tls-ca), or it is not a flashmend server", true
	case c != nil && c.cert == nil && c.clientOverride == nil && (strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "EOF") || strings.Contains(msg, "server preface")):
		// NB: under TLS 1.3 the client finishes its handshake before the
		// server checks for a client certificate; the server's alert
		// may reach the client as a closed connection instead.
		return "TLS: the server closed the connection during the handshake: it may require a client certificate signed by its CA (mutual TLS): pass --tls-cert and --tls-key", true
	}
	return "", false
}

func innermost(msg string) string {
	if i := strings.Index(msg, "x509: "); i >= 0 {
		return strings.Trim(msg[i:], `"`)
	}
	return msg
}
