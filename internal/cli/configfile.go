package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flashmend/flashmend/internal/config"
)

// configAnnotation marks a command whose flags may come from a config file
// and the environment (internal/config); its name is its file section.
const configAnnotation = "flashmend/config"

// configurable makes cmd's flags settable from a config file (--config FILE,
// or $FLASHMEND_CONFIG) and from FLASHMEND_<COMMAND>_<FLAG> variables, for
// every flag the command line leaves unset, and adds --show-config.
// aliases names further variables per flag, read after the command's own
// (FLASHMEND_ENDPOINT for s3's --endpoint). The settings are applied when
// the command runs, before its own RunE.
func configurable(cmd *cobra.Command, aliases map[string][]string) *cobra.Command {
	section := cmd.Name()
	var path string
	var show bool
	f := cmd.Flags()
	f.StringVar(&path, "config", "", fmt.Sprintf(
		"YAML config file, this command's settings in its section %q (default $%s); precedence: flag, then $%s, then the file, then the default",
		section+":", config.ConfigEnv, strings.TrimSuffix(config.EnvName(section, "X"), "X")+"<FLAG>"))
	f.BoolVar(&show, "show-config", false, "print every setting and where it came from (command line, environment, file or default), then exit")
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[configAnnotation] = section
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		settings, err := applyConfig(c, section, path, aliases)
		if err != nil {
			return err
		}
		if show {
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "FLAG\tVALUE\tFROM")
			for _, s := range settings {
				v := s.Value
				switch {
				case v == "":
					v = `""`
				case isSecretFlag(s.Flag):
					v = "(set)"
				}
				fmt.Fprintf(tw, "--%s\t%s\t%s\n", s.Flag, v, s.Origin)
			}
			return tw.Flush()
		}
		return run(c, args)
	}
	return cmd
}

// configSkip are the flags never read from a file or the environment.
func configSkip() []string { return []string{"config", "show-config", "help"} }

// isSecretFlag is a flag whose value --show-config does not print.
func isSecretFlag(name string) bool {
	return name == "secret-key" || name == "s3-secret-key"
}

// applyConfig fills cmd's unset flags from the environment and the config
// file (path, else $FLASHMEND_CONFIG), after checking every section of the
// file against its command's flags.
func applyConfig(cmd *cobra.Command, section, path string, aliases map[string][]string) ([]config.Setting, error) {
	if path == "" {
		path = os.Getenv(config.ConfigEnv)
	}
	var file *config.File
	if path != "" {
		var err error
		if file, err = config.Load(path); err != nil {
			return nil, err
		}
		if err := file.Check(configSections(cmd.Root()), configSkip()...); err != nil {
			return nil, err
		}
	}
	return config.Apply(cmd.Flags(), config.Options{
		Section: section, File: file, Environ: os.Environ(), Aliases: aliases, Skip: configSkip(),
	})
}

// configSections maps each configurable command's name (its section) to its
// flags.
func configSections(root *cobra.Command) map[string]*pflag.FlagSet {
	out := map[string]*pflag.FlagSet{}
	for _, c := range root.Commands() {
		if name, ok := c.Annotations[configAnnotation]; ok {
			out[name] = c.Flags()
		}
	}
	return out
}
