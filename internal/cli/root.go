package cli

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
	"github.com/flashmend/flashmend/internal/crashpoint"
)

// Version is the flashmend release; set with -ldflags at release time.
var Version = "0.1.0-dev"

// Main runs the command line with args and returns the process exit code:
// 0 on success, 2 on a usage or invalid-argument error, 1 otherwise.
func Main(args []string, stdout, stderr io.Writer) int {
	// A crash point armed by the harness (FLASHMEND_CRASHPOINT); a
	// malformed one stops the process before it does anything.
	if spec, ok, err := crashpoint.ArmFromEnv(); err != nil {
		fmt.Fprintln(stderr, "flashmend:", err)
		return 2
	} else if ok {
		fmt.Fprintf(stderr, "flashmend: crash point %s armed\n", spec)
	}
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "flashmend:", rpcNoise.ReplaceAllString(err.Error(), ""))
	var usage usageError
	if errors.As(err, &usage) || base.IsInvalidArgument(err) || isCobraUsageError(err) {
		return 2
	}
	return 1
}

// isCobraUsageError recognizes the usage errors cobra returns without a
// hook to mark them: a missing required flag, an unknown top-level command.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "required flag(s) ") || strings.HasPrefix(msg, "unknown command ")
}

// rpcNoise is gRPC's wrapping of a server's error message, which says
// nothing to a user that the message does not ("rpc error: code =
// Unavailable desc = placement: 6 copies need 6 nodes").
var rpcNoise = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// usageError marks flag and argument errors found by cobra.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// NewRoot returns the root command with every subcommand attached.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "flashmend",
		Short: "Reliable distributed storage on cheap, unreliable flash",
		Long: `flashmend turns dense, error-prone flash into reliable storage: it manages
flash directly (SDF), detects and repairs bit corruption live from remote
redundancy (DIRECT), repairs failed dies instead of whole drives (Reparo), and
balances wear across servers (Chameleon).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		// Subcommands, one file each in this package.
		newExperimentsCmd(),
		newModelCmd(),
		newFlashCmd(),
		newNodeCmd(),
		newCoordinatorCmd(),
		newDevCmd(),
		newDemoCmd(),
		newS3Cmd(),
		newCtlCmd(),
		newPebbleCmd(),
		newSimCmd(),
		newBenchCmd(),
		newTortureCmd(),
		newCertsCmd(),
	)
	addFlashDeviceCmds(root) // flash format|info|bench|inject (flashdev.go)
	addKVCmds(root)          // kv and ctl kv (kv.go)
	addExamples(root)        // every command's --help example (examples.go)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with
// subcommands and nothing to run itself) print its help when called bare and
// fail with a usage error naming an unknown subcommand; cobra's default
// prints the help and exits 0 for a typo below the top level.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return usageError{fmt.Errorf("%s; run '%s --help' for its commands", msg, c.CommandPath())}
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
}

// exactArgs checks the number of positional arguments; the usage error
// names the command's usage line, so that "kv scan" alone says what it
// wants, not only how many.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		want := "no arguments"
		switch n {
		case 0:
		case 1:
			want = "1 argument"
		default:
			want = fmt.Sprintf("%d arguments", n)
		}
		return usageError{fmt.Errorf("%s takes %s, got %d (usage: %s)", cmd.CommandPath(), want, len(args), cmd.UseLine())}
	}
}

// rangeArgs checks that a command has between lo and hi positional
// arguments, with exactArgs' message.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= lo && len(args) <= hi {
			return nil
		}
		return usageError{fmt.Errorf("%s takes %d to %d arguments, got %d (usage: %s)", cmd.CommandPath(), lo, hi, len(args), cmd.UseLine())}
	}
}
