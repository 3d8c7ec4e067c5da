package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// commandExamples are the examples --help prints, by command path without
// "flashmend " (a command whose constructor sets its own Example keeps
// it). Every command has one: TestEveryCommandHasAnExample walks the tree
// and parses each example's flashmend lines against the command's flags
// and arguments, so an example cannot name a flag that is gone.
// `ctl kv X` takes `kv X`'s example, as ctl.
func commandExamples() map[string]string {
	return map[string]string{
		"": `flashmend dev --dir .flashmend/dev        # a local cluster (make run)
flashmend ctl put hello ./photo.jpg          # in another terminal
flashmend ctl --help`,

		// The cluster.
		"dev": `flashmend dev --dir .flashmend/dev
flashmend dev --dir /tmp/fm --nodes 3 --store file --s3 127.0.0.1:9000 --dashboard off
flashmend dev --config flashmend.yaml --show-config    # where each setting comes from`,
		"coordinator": `flashmend coordinator --dir /var/lib/flashmend/coordinator --listen 10.0.0.2:7000 \
  --etcd http://etcd1:2379,http://etcd2:2379,http://etcd3:2379 --dashboard 10.0.0.2:7002
FLASHMEND_CONFIG=/etc/flashmend/flashmend.yaml flashmend coordinator   # settings in its coordinator: section`,
		"node": `flashmend node --dir /var/lib/flashmend/node --coordinator 10.0.0.2:7000 --listen 10.0.0.11:7100
flashmend node --config /etc/flashmend/flashmend.yaml --tls-cert node-1.crt --tls-key node-1.key
FLASHMEND_NODE_LISTEN=0.0.0.0:7100 FLASHMEND_NODE_ADVERTISE=node-1 flashmend node --config flashmend.yaml`,
		"s3": `FLASHMEND_S3_ACCESS_KEY=AK FLASHMEND_S3_SECRET_KEY=SK \
  flashmend s3 --endpoint coord.example:7000 --listen 0.0.0.0:9000
flashmend s3 --config flashmend.yaml --tls-cert s3.crt --tls-key s3.key --tls-ca ca.crt   # HTTPS`,
		"certs": `flashmend certs --dir /etc/flashmend/tls coordinator=coord.example,10.0.0.2 \
  node-1=node-1.example,10.0.0.11 s3=s3.example client
flashmend certs --dir /etc/flashmend/tls node-7=10.0.0.17     # one more, from the same CA`,
		"demo": `flashmend demo                   # then open the dashboard URL it prints
flashmend demo --objects 48 --keep=false`,

		// The client tool.
		"ctl": `flashmend ctl nodes
flashmend ctl --endpoint 10.0.0.2:7000 --tls-ca ca.crt ls photos/`,
		"ctl put":           `flashmend ctl put photos/cat.jpg ./cat.jpg --redundancy ec`,
		"ctl get":           `flashmend ctl get photos/cat.jpg ./cat.jpg --report`,
		"ctl stat":          `flashmend ctl stat photos/cat.jpg`,
		"ctl rm":            `flashmend ctl rm photos/cat.jpg`,
		"ctl ls":            `flashmend ctl ls photos/`,
		"ctl nodes":         `flashmend ctl nodes`,
		"ctl repairs":       `flashmend ctl repairs --recent 50`,
		"ctl inject":        `flashmend ctl inject uber --node 2 1e-6`,
		"ctl inject uber":   `flashmend ctl inject uber --node 2 1e-6 --persistent`,
		"ctl corrupt":       `flashmend ctl corrupt photos/cat.jpg --replica 0 --offset 1000 --bits 3`,
		"ctl fail-die":      `flashmend ctl fail-die --node 3 --die 5`,
		"ctl scrub":         `flashmend ctl scrub photos/`,
		"ctl rebuild-index": `flashmend ctl rebuild-index`,
		"ctl wear":          `flashmend ctl wear`,

		// The KV store (also as ctl kv).
		"kv": `flashmend kv put user/ada active
flashmend kv --addrs 1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003 get user/ada`,
		"kv init":    `flashmend kv init --splits g,n,t`,
		"kv put":     `flashmend kv put user/ada active`,
		"kv get":     `flashmend kv get user/ada --consistency eventual`,
		"kv del":     `flashmend kv del user/ada`,
		"kv scan":    `flashmend kv scan user/ user0 --limit 100`,
		"kv corrupt": `flashmend kv corrupt user/ada --node 2`,
		"kv status":  `flashmend kv status`,
		"kv serve":   `flashmend kv serve --nodes 3 --splits m`,
		"kv demo":    `flashmend kv demo --mode crash`,

		"bench": `flashmend bench --op get --size 8MiB --concurrency 4 --duration 30s
flashmend bench --kv --op put --value-size 800 --keys 5000 --format json`,

		// The flash device, SDF and Pebble.
		"flash":            `flashmend flash format --dir /tmp/dev --preset small`,
		"flash format":     `flashmend flash format --dir /tmp/dev --preset tlc`,
		"flash info":       `flashmend flash info --dir /tmp/dev`,
		"flash bench":      `flashmend flash bench --dir /tmp/dev --runs 1 --report /tmp/sdf.md`,
		"flash inject":     `flashmend flash inject --dir /tmp/dev --uber 1e-7 --fail-die 0/1`,
		"flash presets":    `flashmend flash presets`,
		"flash throughput": `flashmend flash throughput --preset sdf --format csv`,
		"flash errors":     `flashmend flash errors --model physical --rber 1e-3 --reads 100000`,
		"pebble":           `flashmend pebble load --dir /tmp/dev --keys 100000`,
		"pebble load":      `flashmend pebble load --dir /tmp/dev --keys 100000 --sst-metadata-copies`,
		"pebble check":     `flashmend pebble check --dir /tmp/dev --keys 100000`,

		// Models, simulator, experiments, harness.
		"model":           `flashmend model direct --sweep --format csv`,
		"model direct":    `flashmend model direct --sweep --from 1e-12 --to 1e-6 --points-per-decade 2`,
		"model reparo":    `flashmend model reparo`,
		"model chameleon": `flashmend model chameleon --format json`,
		"model ecc":       `flashmend model ecc --rber 1e-3 --correctable-bits 40`,
		"sim": `flashmend sim --workload ycsb-zipf --servers 50 --policy chameleon
flashmend sim --workload msr:trace.csv --policy edm --format json --quiet`,
		"experiments":      `flashmend experiments run chameleon-wear --out docs/results`,
		"experiments list": `flashmend experiments list`,
		"experiments run": `flashmend experiments run model-direct --out /tmp/results
flashmend experiments run --all --out docs/results`,
		"torture":           `flashmend torture all --out /tmp/torture --seed 7`,
		"torture all":       `flashmend torture all --out /tmp/torture --seed 7`,
		"torture cords":     `flashmend torture cords --only pebble --out /tmp/torture`,
		"torture fuzz":      `flashmend torture fuzz --fuzztime 30s --out /tmp/torture`,
		"torture cords-sdf": `flashmend torture cords-sdf --only sstable --out /tmp/torture`,
	}
}

// addExamples sets each command's Example from commandExamples, indented
// as cobra prints it.
func addExamples(root *cobra.Command) {
	examples := commandExamples()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Example != "" {
			return
		}
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		ex, ok := examples[path]
		if !ok {
			if kvPath, isCtlKV := strings.CutPrefix(path, "ctl "); isCtlKV && strings.HasPrefix(kvPath, "kv") {
				if ex, ok = examples[kvPath]; ok {
					ex = strings.ReplaceAll(ex, "flashmend kv", "flashmend ctl kv")
				}
			}
		}
		if ok {
			c.Example = indent(ex)
		}
	}
	walk(root)
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
