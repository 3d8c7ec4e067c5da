package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"

	"github.com/flashmend/flashmend/internal/base"
)

// CA is a certificate authority that issues the certificates of a
// development or test deployment (flashmend certs). Its keys are ECDSA
// P-256.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// NewCA creates a CA named name, valid from now for validity. Keys and
// serial numbers come from crypto/rand (key material is never seeded).
func NewCA(name string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"flashmend"}},
		NotBefore:             now.Add(-time.Hour), // clocks of the machines differ a little
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA's certificate and key (what WriteFiles wrote).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, base.InvalidArgumentf("CA: %v", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, base.InvalidArgumentf("CA: %s holds no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, base.InvalidArgumentf("CA: %s: %v", certFile, err)
	}
	if !cert.IsCA {
		return nil, base.InvalidArgumentf("CA: %s is not a CA certificate", certFile)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, base.InvalidArgumentf("CA: %v", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, base.InvalidArgumentf("CA: %s holds no PEM key", keyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, base.InvalidArgumentf("CA: key %s: %v", keyFile, err)
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, base.InvalidArgumentf("CA: key %s cannot sign", keyFile)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, base.InvalidArgumentf("CA: key %s is not the key of %s", keyFile, certFile)
	}
	return &CA{cert: cert, key: key, certPEM: certPEM}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// CertPEM is the CA's certificate (what clients and servers trust: the
// --tls-ca file).
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM is the CA's private key (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.key) }

// NotAfter is when the CA's certificate expires.
func (ca *CA) NotAfter() time.Time { return ca.cert.NotAfter }

// Issue returns a certificate and its key for name, valid for each of
// hosts (IP addresses and DNS names, as clients dial them) as a server and
// as a client, from now for validity (and no longer than the CA).
func (ca *CA) Issue(name string, hosts []string, now time.Time, validity time.Duration) (certPEM, keyPEMBytes []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, base.InvalidArgumentf("certificate %q: no host names or addresses", name)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"flashmend"}},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	for _, h := range hosts {
		if err := CheckHost(h); err != nil {
			return nil, nil, err
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

// CheckHost refuses what cannot be a certificate's host: empty, a URL, a
// host:port, spaces.
func CheckHost(h string) error {
	switch {
	case h == "":
		return base.InvalidArgumentf("empty host name")
	case strings.Contains(h, "://"):
		return base.InvalidArgumentf("host %q is a URL: give its host name or address only", h)
	case net.ParseIP(h) != nil:
		return nil
	case strings.ContainsAny(h, ":/ \t"):
		return base.InvalidArgumentf("host %q: want a DNS name or an IP address, without a port", h)
	}
	return nil
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
