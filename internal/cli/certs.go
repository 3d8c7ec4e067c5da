package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/tlsconf"
)

// certName is what a certificate's name may be: it names its files.
var certName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// newCertsCmd is `flashmend certs`: a dev CA and certificates for given
// hosts (internal/tlsconf).
func newCertsCmd() *cobra.Command {
	var dir string
	var valid, caValid time.Duration
	var force bool
	cmd := &cobra.Command{
		Use:   "certs --dir DIR NAME[=HOST,HOST...]...",
		Short: "Write a development CA and TLS certificates for the given hosts",
		Long: `Writes the files TLS needs (--tls-ca, --tls-cert, --tls-key) for a test or
development deployment: a CA in DIR/ca.crt and DIR/ca.key (created the first
time, reused after, so more certificates can be issued later), and for each
NAME a certificate DIR/NAME.crt with its key DIR/NAME.key, valid for the HOSTs
given (DNS names or IP addresses, as the others dial that process; NAME alone:
the host NAME). Every certificate serves as a server's and as a client's (a
node dials its peers; mutual TLS uses the same files), signed by the CA.

Keys are ECDSA P-256, written readable by their owner only. A certificate
whose files exist is kept (so that running the same command again, as a
container's start does, changes nothing) unless --force. Keep ca.key away from the machines that
run flashmend: whoever holds it can issue certificates the cluster trusts. For
production, use your own CA the same way.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("certs takes at least one NAME[=HOST,...] (usage: %s)", cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return base.InvalidArgumentf("--dir is required")
			}
			type request struct {
				name  string
				hosts []string
			}
			var reqs []request
			seen := map[string]bool{}
			for _, arg := range args {
				name, hostList, hasHosts := strings.Cut(arg, "=")
				if !certName.MatchString(name) || name == "ca" {
					return base.InvalidArgumentf("certificate name %q: want letters, digits, '.', '_' or '-' (it names the files), not \"ca\"", name)
				}
				if seen[name] {
					return base.InvalidArgumentf("certificate %q named twice", name)
				}
				seen[name] = true
				hosts := []string{name}
				if hasHosts {
					hosts = strings.Split(hostList, ",")
				}
				for _, h := range hosts {
					if err := tlsconf.CheckHost(h); err != nil {
						return fmt.Errorf("certificate %q: %w", name, err)
					}
				}
				reqs = append(reqs, request{name, hosts})
			}
			if valid <= 0 || caValid <= 0 {
				return base.InvalidArgumentf("--valid %s, --ca-valid %s: want positive durations", valid, caValid)
			}
			err := os.MkdirAll(dir, 0o755)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			now := time.Now()
			caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
			var ca *tlsconf.CA
			if exists(caCert) || exists(caKey) {
				if ca, err = tlsconf.LoadCA(caCert, caKey); err != nil {
					return err
				}
				fmt.Fprintf(out, "CA: %s (existing, valid until %s)\n", caCert, ca.NotAfter().UTC().Format(time.DateOnly))
			} else {
				if ca, err = tlsconf.NewCA("flashmend dev CA", now, caValid); err != nil {
					return err
				}
				keyPEM, err := ca.KeyPEM()
				if err != nil {
					return err
				}
				if err := base.WriteFileDurable(caKey, keyPEM, 0o600); err != nil {
					return err
				}
				if err := base.WriteFileDurable(caCert, ca.CertPEM(), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(out, "CA: %s (new; its key %s signs the certificates: keep it safe)\n", caCert, caKey)
			}
			for _, r := range reqs {
				certFile, keyFile := filepath.Join(dir, r.name+".crt"), filepath.Join(dir, r.name+".key")
				if !force && exists(certFile) && exists(keyFile) {
					fmt.Fprintf(out, "%s: %s exists, kept (--force issues it again)\n", r.name, certFile)
					continue
				}
				certPEM, keyPEM, err := ca.Issue(r.name, r.hosts, now, valid)
				if err != nil {
					return err
				}
				if err := base.WriteFileDurable(keyFile, keyPEM, 0o600); err != nil {
					return err
				}
				if err := base.WriteFileDurable(certFile, certPEM, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(out, "%s: %s %s for %s\n", r.name, certFile, keyFile, strings.Join(r.hosts, ", "))
			}
			fmt.Fprintf(out, "use: --tls-ca %s --tls-cert %s --tls-key %s\n", caCert,
				filepath.Join(dir, reqs[0].name+".crt"), filepath.Join(dir, reqs[0].name+".key"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "directory of the CA and the certificates")
	f.DurationVar(&valid, "valid", 365*24*time.Hour, "how long the new certificates are valid (at most as long as the CA)")
	f.DurationVar(&caValid, "ca-valid", 10*365*24*time.Hour, "how long a new CA is valid")
	f.BoolVar(&force, "force", false, "issue a certificate again even if its files exist")
	return cmd
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
