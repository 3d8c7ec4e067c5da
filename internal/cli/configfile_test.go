package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flashmend.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// showConfigRow returns --show-config's value and origin of flag.
func showConfigRow(t *testing.T, out, flag string) (value, from string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^--` + regexp.QuoteMeta(flag) + `\s+(\S*)\s+(.+?)\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no row for --%s in:\n%s", flag, out)
	}
	return m[1], m[2]
}

// TestConfigPrecedence runs node, coordinator, dev and s3 with
// --show-config: each setting comes from the command line, else the
// environment, else the file, else the default.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `# one file for every role on this machine
node:
  dir: /var/lib/flashmend/node
  listen: 10.0.0.11:7100
  sync: false
coordinator:
  dir: /var/lib/flashmend/coordinator
  etcd: [http://etcd1:2379, http://etcd2:2379]
dev:
  nodes: 4
s3:
  endpoint: 10.0.0.2:7000
  access-key: AK-from-file
  secret-key: SK-from-file
`)
	out, errOut, code := runCLI(t, "node", "--config", file, "--show-config")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for flag, want := range map[string][2]string{
		"dir":         {"/var/lib/flashmend/node", file + ":3"},
		"listen":      {"10.0.0.11:7100", file + ":4"},
		"sync":        {"false", file + ":5"},
		"coordinator": {`""`, "default"},
		"kv":          {"true", "default"},
	} {
		if v, from := showConfigRow(t, out, flag); v != want[0] || from != want[1] {
			t.Errorf("node --%s = %q from %s, want %q from %s", flag, v, from, want[0], want[1])
		}
	}

	t.Setenv("FLASHMEND_NODE_LISTEN", "10.0.0.12:7100")
	t.Setenv("FLASHMEND_NODE_COORDINATOR", "10.0.0.2:7000")
	out, _, _ = runCLI(t, "node", "--config", file, "--show-config", "--sync=true")
	for flag, want := range map[string][2]string{
		"listen":      {"10.0.0.12:7100", "$FLASHMEND_NODE_LISTEN"},
		"coordinator": {"10.0.0.2:7000", "$FLASHMEND_NODE_COORDINATOR"},
		"sync":        {"true", "command line"},
		"dir":         {"/var/lib/flashmend/node", file + ":3"},
	} {
		if v, from := showConfigRow(t, out, flag); v != want[0] || from != want[1] {
			t.Errorf("node --%s = %q from %s, want %q from %s", flag, v, from, want[0], want[1])
		}
	}
	out, _, _ = runCLI(t, "node", "--config", file, "--show-config", "--listen", "10.0.0.13:7100")
	if v, from := showConfigRow(t, out, "listen"); v != "10.0.0.13:7100" || from != "command line" {
		t.Errorf("flag over environment: %q from %s", v, from)
	}

	// $FLASHMEND_CONFIG names the file when --config does not.
	t.Setenv("FLASHMEND_CONFIG", file)
	out, _, code = runCLI(t, "coordinator", "--show-config")
	if v, from := showConfigRow(t, out, "etcd"); code != 0 || v != "http://etcd1:2379,http://etcd2:2379" || from != file+":8" {
		t.Errorf("coordinator --etcd = %q from %s (exit %d)", v, from, code)
	}
	out, _, _ = runCLI(t, "dev", "--show-config")
	if v, from := showConfigRow(t, out, "nodes"); v != "4" || from != file+":10" {
		t.Errorf("dev --nodes = %q from %s", v, from)
	}
	// s3: FLASHMEND_ENDPOINT is below FLASHMEND_S3_ENDPOINT; the secret
	// is never printed.
	t.Setenv("FLASHMEND_ENDPOINT", "10.0.0.3:7000")
	out, _, _ = runCLI(t, "s3", "--show-config")
	if v, from := showConfigRow(t, out, "endpoint"); v != "10.0.0.3:7000" || from != "$FLASHMEND_ENDPOINT" {
		t.Errorf("s3 --endpoint = %q from %s", v, from)
	}
	if v, _ := showConfigRow(t, out, "secret-key"); v != "(set)" || strings.Contains(out, "SK-from-file") {
		t.Errorf("s3 --show-config printed the secret:\n%s", out)
	}
	t.Setenv("FLASHMEND_S3_ENDPOINT", "10.0.0.4:7000")
	out, _, _ = runCLI(t, "s3", "--show-config")
	if v, from := showConfigRow(t, out, "endpoint"); v != "10.0.0.4:7000" || from != "$FLASHMEND_S3_ENDPOINT" {
		t.Errorf("s3 --endpoint = %q from %s", v, from)
	}
}

// TestConfigErrors: a mistake in the file or the environment is a usage
// error (exit 2) that says where it is, and nothing starts.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		env        [2]string
		want       string
	}{
		{name: "unknown key", text: "node:\n  dir: /d\n  listn: 1.2.3.4:5\n", want: "flashmend.yaml:3: node.listn: unknown key: 'flashmend node' has no flag --listn (did you mean listen?)"},
		{name: "unknown key in another section", text: "node:\n  dir: /d\ns3:\n  acces-key: x\n", want: "flashmend.yaml:4: s3.acces-key: unknown key: 'flashmend s3' has no flag --acces-key (did you mean access-key?)"},
		{name: "unknown section", text: "nodes:\n  dir: /d\n", want: `flashmend.yaml:1: unknown section "nodes" (sections: coordinator, dev, node, s3)`},
		{name: "bad value", text: "node:\n  sync: maybe\n", want: `flashmend.yaml:2: node.sync: invalid value "maybe" for --sync (true or false)`},
		{name: "bad size", text: "node:\n  repair-reserve: lots\n", want: `flashmend.yaml:2: node.repair-reserve: invalid value "lots" for --repair-reserve (a number)`},
		{name: "not yaml", text: "node: [\n", want: "flashmend.yaml: not YAML"},
		{name: "bad environment value", text: "node:\n  dir: /d\n", env: [2]string{"FLASHMEND_NODE_START_TIMEOUT", "soon"}, want: `environment variable FLASHMEND_NODE_START_TIMEOUT: invalid value "soon" for --start-timeout`},
		{name: "unknown environment variable", text: "node:\n  dir: /d\n", env: [2]string{"FLASHMEND_NODE_LISTN", "x"}, want: "environment variable FLASHMEND_NODE_LISTN: 'flashmend node' has no flag --listn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			file := writeConfig(t, tc.text)
			out, errOut, code := runCLI(t, "node", "--config", file, "--coordinator", "127.0.0.1:1")
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q\nwant exit 2 and %q", code, errOut, tc.want)
			}
			if out != "" {
				t.Fatalf("printed %q: something started", out)
			}
		})
	}
	_, errOut, code := runCLI(t, "node", "--config", filepath.Join(t.TempDir(), "absent.yaml"))
	if code != 2 || !strings.Contains(errOut, "absent.yaml: no such file or directory") {
		t.Fatalf("missing file: exit %d %q", code, errOut)
	}
}

// TestDeployConfigFile checks the compose example's config file against
// the commands' flags, and that each role it configures reads its section.
func TestDeployConfigFile(t *testing.T) {
	path := filepath.Join("..", "..", "deploy", "flashmend.yaml")
	for _, role := range []string{"coordinator", "node", "s3"} {
		out, errOut, code := runCLI(t, role, "--config", path, "--show-config")
		if code != 0 {
			t.Fatalf("%s --config %s: exit %d: %s", role, path, code, errOut)
		}
		if v, from := showConfigRow(t, out, "tls-ca"); v != "/tls/ca.crt" || !strings.HasPrefix(from, path+":") {
			t.Errorf("%s --tls-ca = %q from %s, want /tls/ca.crt from the file", role, v, from)
		}
	}
}
