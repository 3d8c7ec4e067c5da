package tlsconf

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/flashmend/flashmend/internal/base"
)

// pki is a CA and certificates written to a directory.
type pki struct {
	dir string
	ca  *CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := NewCA("test CA", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: t.TempDir(), ca: ca}
	p.write(t, "ca.crt", ca.CertPEM())
	kp, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	p.write(t, "ca.key", kp)
	return p
}

func (p *pki) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue writes NAME.crt and NAME.key for hosts.
func (p *pki) issue(t *testing.T, name string, hosts ...string) Files {
	t.Helper()
	c, k, err := p.ca.Issue(name, hosts, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return Files{CertFile: p.write(t, name+".crt", c), KeyFile: p.write(t, name+".key", k), CAFile: filepath.Join(p.dir, "ca.crt")}
}

func mustLoad(t *testing.T, f Files) *Config {
	t.Helper()
	c, err := Load(f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveHealth serves gRPC's health service with cfg's credentials on
// loopback and returns its address.
func serveHealth(t *testing.T, cfg *Config) string {
	t.Helper()
	opt, err := cfg.ServerOption()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opt)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// check calls the health service at addr with cfg; it returns the error.
func check(t *testing.T, addr string, cfg *Config) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, cfg.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func wantExplained(t *testing.T, c *Config, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	reason, ok := Explain(c, err.Error())
	if !ok || !strings.Contains(reason, want) {
		t.Fatalf("error %v explained as %q (%v), want %q", err, reason, ok, want)
	}
}

// TestGRPC: a TLS server answers a client that trusts its CA; a client
// without the CA, a plaintext client, and a plaintext server each fail
// with an explanation; with client auth, a client without a certificate
// is refused.
func TestGRPC(t *testing.T) {
	p := newPKI(t)
	server := mustLoad(t, p.issue(t, "server", "127.0.0.1", "localhost"))
	addr := serveHealth(t, server)
	client := mustLoad(t, Files{CAFile: filepath.Join(p.dir, "ca.crt")})
	if err := check(t, addr, client); err != nil {
		t.Fatalf("client with the CA: %v", err)
	}
	// A client that trusts another CA (its own, here).
	other := newPKI(t)
	stranger := mustLoad(t, Files{CAFile: filepath.Join(other.dir, "ca.crt")})
	wantExplained(t, stranger, check(t, addr, stranger), "not signed by a CA this client trusts")
	wantExplained(t, nil, check(t, addr, nil), "it may require TLS")
	plainAddr := serveHealth(t, nil)
	wantExplained(t, client, check(t, plainAddr, client), "does not speak TLS")

	// A certificate for another address.
	wrong := mustLoad(t, p.issue(t, "wrong", "10.1.2.3"))
	wrongAddr := serveHealth(t, wrong)
	wantExplained(t, client, check(t, wrongAddr, client), "not for the address dialled")

	// Mutual TLS.
	mtlsFiles := p.issue(t, "mtls-server", "127.0.0.1")
	mtlsFiles.ClientAuth = true
	mtls := serveHealth(t, mustLoad(t, mtlsFiles))
	wantExplained(t, client, check(t, mtls, client), "client certificate signed by its CA (mutual TLS): pass --tls-cert and --tls-key")
	withCert := mustLoad(t, p.issue(t, "client", "client.flashmend"))
	if err := check(t, mtls, withCert); err != nil {
		t.Fatalf("client with a certificate of the CA: %v", err)
	}
	// A client certificate from another CA is refused too.
	otherCert := other.issue(t, "other-client", "client.flashmend")
	otherCert.CAFile = filepath.Join(p.dir, "ca.crt") // trusts the server
	foreign, err := Load(otherCert, time.Now())
	if err == nil || !strings.Contains(err.Error(), "does not verify against the CA") {
		t.Fatalf("a certificate of another CA with this CA: %v", err)
	}
	_ = foreign
	otherCert.CAFile = ""
	foreign = mustLoad(t, otherCert)
	conf := foreign.ClientTLS()
	conf.RootCAs = client.ClientTLS().RootCAs
	if err := check(t, mtls, FromClientTLS(conf)); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
}

// TestHTTPS serves HTTP over ServerTLS.
func TestHTTPS(t *testing.T) {
	p := newPKI(t)
	server := mustLoad(t, p.issue(t, "s3", "127.0.0.1"))
	sc, err := server.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := tls.Listen("tcp", "127.0.0.1:0", sc)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close() })
	client := mustLoad(t, Files{CAFile: filepath.Join(p.dir, "ca.crt")})
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: client.ClientTLS()}}
	resp, err := hc.Get("https://" + lis.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q", body)
	}
	if resp, err := http.Get("https://" + lis.Addr().String() + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("a client without the CA was answered")
	} else if !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a client without the CA: %v", err)
	}
	if server.Scheme() != "https" || (*Config)(nil).Scheme() != "http" {
		t.Fatal("scheme")
	}
}

// TestLoadErrors: each mistake is an invalid argument naming the file.
func TestLoadErrors(t *testing.T) {
	p := newPKI(t)
	good := p.issue(t, "node", "127.0.0.1")
	other := newPKI(t).issue(t, "other", "127.0.0.1")
	empty := p.write(t, "empty.pem", []byte("not pem\n"))
	expired := func() Files {
		c, k, err := p.ca.Issue("old", []string{"127.0.0.1"}, time.Now().Add(-48*time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return Files{CertFile: p.write(t, "old.crt", c), KeyFile: p.write(t, "old.key", k)}
	}()
	for _, tc := range []struct {
		name string
		f    Files
		want string
	}{
		{"cert without key", Files{CertFile: good.CertFile}, "--tls-cert and --tls-key go together"},
		{"key without cert", Files{KeyFile: good.KeyFile}, "--tls-cert and --tls-key go together"},
		{"client auth without CA", Files{CertFile: good.CertFile, KeyFile: good.KeyFile, ClientAuth: true}, "--tls-client-auth needs --tls-ca"},
		{"client auth alone", Files{ClientAuth: true}, "--tls-client-auth needs --tls-ca"},
		{"missing CA", Files{CAFile: filepath.Join(p.dir, "absent.crt")}, "absent.crt: no such file"},
		{"CA without certificates", Files{CAFile: empty}, "empty.pem holds no PEM certificate"},
		{"missing cert", Files{CertFile: filepath.Join(p.dir, "absent.crt"), KeyFile: good.KeyFile}, "absent.crt"},
		{"key of another certificate", Files{CertFile: good.CertFile, KeyFile: other.KeyFile}, "private key does not match public key"},
		{"certificate of another CA", Files{CertFile: other.CertFile, KeyFile: other.KeyFile, CAFile: good.CAFile}, "does not verify against the CA"},
		{"expired", expired, "is valid from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.f, time.Now())
			if err == nil || !base.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want an invalid argument containing %q", err, tc.want)
			}
		})
	}
	if c, err := Load(Files{}, time.Now()); c != nil || err != nil {
		t.Fatalf("no files: %v %v, want plaintext", c, err)
	}
	ca := mustLoad(t, Files{CAFile: good.CAFile})
	if _, err := ca.ServerTLS(); err == nil || !strings.Contains(err.Error(), "a server needs its certificate") {
		t.Fatalf("server without certificate: %v", err)
	}
}

// TestCA: issued certificates carry the hosts, both uses and a bounded
// validity; a CA reloads from its files; bad hosts are refused.
func TestCA(t *testing.T) {
	p := newPKI(t)
	f := p.issue(t, "node-1", "node-1", "10.0.0.11", "::1")
	c := mustLoad(t, f)
	if got := strings.Join(c.Names(), ","); got != "node-1,10.0.0.11,::1" {
		t.Fatalf("names %s", got)
	}
	ca, err := LoadCA(filepath.Join(p.dir, "ca.crt"), filepath.Join(p.dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := ca.Issue("long", []string{"a"}, time.Now(), 100*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	lf := p.write(t, "long.crt", cert)
	_ = lf
	if _, err := LoadCA(filepath.Join(p.dir, "ca.crt"), f.KeyFile); err == nil || !strings.Contains(err.Error(), "is not the key of") {
		t.Fatalf("CA with another key: %v", err)
	}
	if _, err := LoadCA(f.CertFile, f.KeyFile); err == nil || !strings.Contains(err.Error(), "not a CA certificate") {
		t.Fatalf("a leaf as CA: %v", err)
	}
	for _, h := range []string{"", "https://x", "host:7000", "a b"} {
		if _, _, err := ca.Issue("bad", []string{h}, time.Now(), time.Hour); err == nil || !base.IsInvalidArgument(err) {
			t.Errorf("host %q accepted: %v", h, err)
		}
	}
}
