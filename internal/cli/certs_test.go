package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashmend/flashmend/internal/tlsconf"
)

// TestCerts: certs writes a CA and certificates that load as a TLS setup;
// running it again keeps them (and the CA), --force issues them again,
// bad names and hosts are usage errors.
func TestCerts(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runCLI(t, "certs", "--dir", dir, "node-1=10.0.0.11,node-1.example", "client")
	if code != 0 || !strings.Contains(out, "CA: "+filepath.Join(dir, "ca.crt")+" (new;") ||
		!strings.Contains(out, "node-1: "+filepath.Join(dir, "node-1.crt")) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	files := tlsconf.Files{CertFile: filepath.Join(dir, "node-1.crt"), KeyFile: filepath.Join(dir, "node-1.key"), CAFile: filepath.Join(dir, "ca.crt"), ClientAuth: true}
	c, err := tlsconf.Load(files, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "node-1.example,10.0.0.11" {
		t.Fatalf("names %s", got)
	}
	if st, err := os.Stat(files.KeyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, node1 := read("ca.crt"), read("node-1.crt")
	out, _, code = runCLI(t, "certs", "--dir", dir, "node-1=10.0.0.11", "node-2")
	if code != 0 || !strings.Contains(out, "node-1: "+files.CertFile+" exists, kept") || !strings.Contains(out, "(existing, valid until") {
		t.Fatalf("again: exit %d\n%s", code, out)
	}
	if !bytes.Equal(read("ca.crt"), ca) || !bytes.Equal(read("node-1.crt"), node1) {
		t.Fatal("running again changed the CA or a kept certificate")
	}
	if _, err := tlsconf.Load(tlsconf.Files{CertFile: filepath.Join(dir, "node-2.crt"), KeyFile: filepath.Join(dir, "node-2.key"), CAFile: files.CAFile}, time.Now()); err != nil {
		t.Fatalf("node-2, issued by the same CA: %v", err)
	}
	if _, _, code = runCLI(t, "certs", "--dir", dir, "--force", "node-1=10.0.0.11"); code != 0 || bytes.Equal(read("node-1.crt"), node1) {
		t.Fatalf("--force: exit %d, certificate unchanged %v", code, bytes.Equal(read("node-1.crt"), node1))
	}
	for _, bad := range [][]string{
		{"certs", "--dir", dir, "../evil"},
		{"certs", "--dir", dir, "ca"},
		{"certs", "--dir", dir, "x=https://x.example"},
		{"certs", "--dir", dir, "x=host:7000"},
		{"certs", "--dir", dir},
		{"certs", "node-3"},
	} {
		if _, errOut, code := runCLI(t, bad...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", bad, code, errOut)
		}
	}
}
