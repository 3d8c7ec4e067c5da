package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flashmend/flashmend/internal/base"
)

// Version is the flashmend release; set with -ldflags at release time.
var Version = "0.1.0-dev"

// Main runs the command line with args and returns the process exit code:
// 0 on success, 2 on a usage or invalid-argument error, 1 otherwise.
func Main(args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "flashmend:", err)
	var usage usageError
	if errors.As(err, &usage) || base.IsInvalidArgument(err) {
		return 2
	}
	return 1
}

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
		newCtlCmd(),
		newPebbleCmd(),
	)
	addFlashDeviceCmds(root) // flash format|info|bench|inject (flashdev.go)
	addKVCmds(root)          // kv and ctl kv (kv.go)
	return root
}

// exactArgs is cobra.ExactArgs with the error marked as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
