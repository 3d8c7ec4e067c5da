package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/base"
)

// nodeFlags is a flag set shaped like node's: a string, a bool, a
// duration, a byte size.
type nodeFlags struct {
	fs      *pflag.FlagSet
	listen  string
	dir     string
	sync    bool
	timeout time.Duration
	max     base.Bytes
	etcd    string
	cfgFile string
}

func newNodeFlags(t *testing.T, args ...string) *nodeFlags {
	t.Helper()
	n := &nodeFlags{fs: pflag.NewFlagSet("node", pflag.ContinueOnError), max: base.GiB}
	n.fs.StringVar(&n.listen, "listen", "127.0.0.1:0", "")
	n.fs.StringVar(&n.dir, "dir", "", "")
	n.fs.BoolVar(&n.sync, "sync", true, "")
	n.fs.DurationVar(&n.timeout, "start-timeout", 2*time.Minute, "")
	n.fs.Var(&n.max, "max-object", "")
	n.fs.StringVar(&n.etcd, "etcd", "", "")
	n.fs.StringVar(&n.cfgFile, "config", "", "")
	if err := n.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return n
}

func parse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func origin(settings []Setting, flag string) string {
	for _, s := range settings {
		if s.Flag == flag {
			return s.Origin
		}
	}
	return "absent"
}

// TestPrecedence checks flag > environment > file > default for each
// flag on its own, in every combination of the three sources.
func TestPrecedence(t *testing.T) {
	for mask := 0; mask < 8; mask++ {
		fromFlag, fromEnv, fromFile := mask&1 != 0, mask&2 != 0, mask&4 != 0
		var args, environ []string
		text := "node:\n  dir: /data\n"
		want, wantOrigin := "127.0.0.1:0", "default"
		if fromFile {
			text += "  listen: 10.0.0.1:7100\n"
			want, wantOrigin = "10.0.0.1:7100", "test.yaml:3"
		}
		if fromEnv {
			environ = append(environ, "FLASHMEND_NODE_LISTEN=10.0.0.2:7100")
			want, wantOrigin = "10.0.0.2:7100", "$FLASHMEND_NODE_LISTEN"
		}
		if fromFlag {
			args = append(args, "--listen", "10.0.0.3:7100")
			want, wantOrigin = "10.0.0.3:7100", "command line"
		}
		n := newNodeFlags(t, args...)
		settings, err := Apply(n.fs, Options{Section: "node", File: parse(t, text), Environ: environ, Skip: []string{"config"}})
		if err != nil {
			t.Fatalf("flag=%v env=%v file=%v: %v", fromFlag, fromEnv, fromFile, err)
		}
		if n.listen != want || origin(settings, "listen") != wantOrigin {
			t.Errorf("flag=%v env=%v file=%v: listen %q from %s, want %q from %s",
				fromFlag, fromEnv, fromFile, n.listen, origin(settings, "listen"), want, wantOrigin)
		}
		if n.dir != "/data" || origin(settings, "dir") != "test.yaml:2" {
			t.Errorf("dir %q from %s, want /data from the file", n.dir, origin(settings, "dir"))
		}
		if origin(settings, "config") != "absent" || origin(settings, "help") != "absent" {
			t.Errorf("skipped flags reported: %v", settings)
		}
	}
}

// TestTypedValues sets a bool, a duration, a byte size and a list from
// the file and the environment.
func TestTypedValues(t *testing.T) {
	n := newNodeFlags(t)
	f := parse(t, `
node:
  sync: false
  max-object: 64MiB
  etcd: [http://a:2379, http://b:2379]
`)
	_, err := Apply(n.fs, Options{Section: "node", File: f, Environ: []string{"FLASHMEND_NODE_START_TIMEOUT=30s", "PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if n.sync || n.max != 64*base.MiB || n.etcd != "http://a:2379,http://b:2379" || n.timeout != 30*time.Second {
		t.Fatalf("sync %v max %v etcd %q timeout %v", n.sync, n.max, n.etcd, n.timeout)
	}
	// A value from the file or the environment counts as set, as one on
	// the command line; a default does not.
	for name, want := range map[string]bool{"sync": true, "start-timeout": true, "listen": false} {
		if got := n.fs.Lookup(name).Changed; got != want {
			t.Errorf("--%s changed %v, want %v", name, got, want)
		}
	}
}

// TestEnvAlias reads an alias after the flag's own variable.
func TestEnvAlias(t *testing.T) {
	aliases := map[string][]string{"etcd": {"OTHER_ETCD"}}
	n := newNodeFlags(t)
	if _, err := Apply(n.fs, Options{Section: "node", Environ: []string{"OTHER_ETCD=http://x"}, Aliases: aliases}); err != nil || n.etcd != "http://x" {
		t.Fatalf("alias: %q %v", n.etcd, err)
	}
	n = newNodeFlags(t)
	if _, err := Apply(n.fs, Options{Section: "node", Environ: []string{"OTHER_ETCD=http://x", "FLASHMEND_NODE_ETCD=http://y"}, Aliases: aliases}); err != nil || n.etcd != "http://y" {
		t.Fatalf("own variable before alias: %q %v", n.etcd, err)
	}
}

// TestErrors: every mistake is an invalid-argument error naming where it
// is.
func TestErrors(t *testing.T) {
	known := func() map[string]*pflag.FlagSet {
		return map[string]*pflag.FlagSet{"node": newNodeFlags(t).fs, "s3": newNodeFlags(t).fs}
	}
	for _, tc := range []struct {
		name, text string
		environ    []string
		want       string
	}{
		{name: "not yaml", text: "node: [\n", want: "test.yaml: not YAML"},
		{name: "not a mapping", text: "- a\n- b\n", want: "test.yaml:1: the file is a list"},
		{name: "top-level key", text: "listen: 1.2.3.4:5\n", want: `test.yaml:1: "listen" is a value; a top-level key is a section`},
		{name: "unknown section", text: "nodes:\n  listen: x\n", want: `test.yaml:1: unknown section "nodes" (sections: node, s3)`},
		{name: "unknown key", text: "node:\n  dir: /d\n  listn: x\n", want: "test.yaml:3: node.listn: unknown key: 'flashmend node' has no flag --listn (did you mean listen?)"},
		{name: "unknown key in another section", text: "node:\n  dir: /d\ns3:\n  lisen: x\n", want: "test.yaml:4: s3.lisen: unknown key"},
		{name: "skipped key", text: "node:\n  config: other.yaml\n", want: "test.yaml:2: node.config: unknown key"},
		{name: "mapping value", text: "node:\n  listen:\n    host: a\n", want: "test.yaml:2: node.listen: a mapping; want a value or a list of values"},
		{name: "null value", text: "node:\n  listen:\n", want: "test.yaml:2: node.listen: no value"},
		{name: "nested list", text: "node:\n  etcd: [[a]]\n", want: "node.etcd: a list item at line 2 is a list"},
		{name: "comma in list", text: "node:\n  etcd: [\"a,b\"]\n", want: `list item "a,b" holds a comma`},
		{name: "duplicate key", text: "node:\n  dir: /a\n  dir: /b\n", want: "test.yaml:3: node.dir again (first at line 2)"},
		{name: "duplicate section", text: "node:\n  dir: /a\nnode:\n  dir: /b\n", want: `test.yaml:3: section "node" again (first at line 1)`},
		{name: "bad bool", text: "node:\n  sync: yes\n", want: `test.yaml:2: node.sync: invalid value "yes" for --sync (true or false)`},
		{name: "bad duration", text: "node:\n  start-timeout: 10\n", want: `test.yaml:2: node.start-timeout: invalid value "10" for --start-timeout (a duration such as 500ms, 10s or 2m)`},
		{name: "bad size", text: "node:\n  max-object: lots\n", want: `test.yaml:2: node.max-object: invalid value "lots" for --max-object (bytes)`},
		{name: "bad env value", environ: []string{"FLASHMEND_NODE_SYNC=maybe"}, want: `environment variable FLASHMEND_NODE_SYNC: invalid value "maybe" for --sync`},
		{name: "unknown env", environ: []string{"FLASHMEND_NODE_LISTN=x"}, want: "environment variable FLASHMEND_NODE_LISTN: 'flashmend node' has no flag --listn"},
		{name: "env of a skipped flag", environ: []string{"FLASHMEND_NODE_CONFIG=x"}, want: "environment variable FLASHMEND_NODE_CONFIG: 'flashmend node' has no flag --config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("test.yaml", []byte(tc.text))
			if err == nil {
				err = f.Check(known(), "config")
			}
			if err == nil {
				_, err = Apply(newNodeFlags(t).fs, Options{Section: "node", File: f, Environ: tc.environ, Skip: []string{"config"}})
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !base.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\nwant an invalid argument containing %q", err, tc.want)
			}
		})
	}
}

// TestOtherSectionsEnvIgnored: a variable of another command's section is
// not this command's business.
func TestOtherSectionsEnvIgnored(t *testing.T) {
	n := newNodeFlags(t)
	if _, err := Apply(n.fs, Options{Section: "node", Environ: []string{"FLASHMEND_S3_LISTN=x", "FLASHMEND_ENDPOINT=y", "FLASHMEND_NODE_LISTEN="}}); err != nil {
		t.Fatal(err)
	}
	if n.listen != "127.0.0.1:0" {
		t.Fatalf("an empty variable set listen to %q", n.listen)
	}
}

// TestEmptyAndAnchors: an empty file, a comments-only file and YAML
// anchors are fine.
func TestEmptyAndAnchors(t *testing.T) {
	for _, text := range []string{"", "# nothing yet\n", "---\n"} {
		if f := parse(t, text); len(f.Sections()) != 0 {
			t.Fatalf("%q: sections %v", text, f.Sections())
		}
	}
	f := parse(t, "common: &c\n  sync: false\nnode: *c\n")
	if err := f.Check(map[string]*pflag.FlagSet{"node": newNodeFlags(t).fs, "common": newNodeFlags(t).fs}); err != nil {
		t.Fatal(err)
	}
	n := newNodeFlags(t)
	if _, err := Apply(n.fs, Options{Section: "node", File: f}); err != nil || n.sync {
		t.Fatalf("anchor: sync %v, %v", n.sync, err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !base.IsInvalidArgument(err) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	p := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(p, []byte("node:\n  dir: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(p)
	if err != nil || f.Path != p || len(f.Sections()) != 1 {
		t.Fatalf("%v %v", f, err)
	}
}

func TestEnvName(t *testing.T) {
	for _, tc := range [][3]string{{"node", "listen", "FLASHMEND_NODE_LISTEN"}, {"s3", "access-key", "FLASHMEND_S3_ACCESS_KEY"}, {"dev", "s3-secret-key", "FLASHMEND_DEV_S3_SECRET_KEY"}} {
		if got := EnvName(tc[0], tc[1]); got != tc[2] {
			t.Errorf("EnvName(%s, %s) = %s, want %s", tc[0], tc[1], got, tc[2])
		}
	}
}
