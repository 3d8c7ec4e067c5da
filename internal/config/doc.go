// Package config gives the long-running commands (node, coordinator, dev,
// s3, and ctl's shared flags) their settings from three places besides the
// command line: a YAML file, environment variables and the flags' own
// defaults. It knows nothing of the commands: it fills a pflag.FlagSet, so
// every flag a command has is settable in every way, with the flag's own
// parser checking the value.
//
// # Precedence
//
// For each flag, the first of these that has a value wins:
//
//  1. the command line (--listen ADDR);
//  2. the environment: FLASHMEND_<SECTION>_<FLAG>, upper case, dashes as
//     underscores (FLASHMEND_NODE_LISTEN for node's --listen,
//     FLASHMEND_S3_ACCESS_KEY for s3's --access-key), then any alias the
//     command declares (FLASHMEND_ENDPOINT);
//  3. the file named by --config or $FLASHMEND_CONFIG: the key named as the
//     flag, in the section named as the command;
//  4. the flag's default.
//
// # The file
//
// One YAML mapping of sections, one per command, so that a machine that
// runs a node and a gateway keeps both in one file:
//
//	node:
//	  dir: /var/lib/flashmend/node
//	  coordinator: 10.0.0.2:7000
//	  listen: 10.0.0.11:7100
//	  tls-cert: /etc/flashmend/node-1.crt
//	s3:
//	  endpoint: 10.0.0.2:7000
//	  listen: 0.0.0.0:9000
//
// Values are scalars, written as on the command line (1GiB, 10s, true), or
// a list of scalars for a comma-separated flag (etcd: [URL, URL]).
//
// # Failure model
//
// Everything a user can get wrong is an error that names where it is and
// changes nothing (the command does not start): a file that is not YAML or
// not a mapping of sections, an unknown section, a key that is not a flag
// of its section's command (in any section, not only the running
// command's, so that a typo is found wherever it is), a value that is not
// a scalar or a list of scalars, a value the flag refuses, a duplicate key,
// and an environment variable FLASHMEND_<SECTION>_* that names no flag of
// that section. Errors wrap base.ErrInvalidArgument (exit status 2).
package config
