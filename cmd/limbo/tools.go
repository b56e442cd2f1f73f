package main

// The tools beside the product: the sandbox destination, the fault run
// and the benchmark. Each lives in its own package; here are their flags.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/limbo-dev/limbo/bench"
	"github.com/limbo-dev/limbo/chaos"
)

// parseTool parses a tool's flags: --help prints usage and its flags to
// stdout (help is true, the command succeeds); a mistake prints them to
// stderr.
func parseTool(fs *flag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (help bool, err error) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed here, where it belongs
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, usage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return true, nil
		}
		printUsage(stderr)
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return false, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o bench.Options
	o.RegisterFlags(fs)
	if help, err := parseTool(fs, bench.Usage, args, stdout, stderr); help || err != nil {
		return err
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o.Stderr = stderr
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	return printJSON(stdout, rep)
}

// cmdChaos runs the fault run; exit 1 when an invariant does not hold.
func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var o chaos.Options
	realLag := o.RegisterFlags(fs)
	verbose := fs.Bool("verbose", false, "log every reconciliation and worker event to stderr")
	help, err := parseTool(fs, chaos.Usage, args, stdout, stderr)
	if err != nil {
		return 2, err
	} else if help {
		return 0, nil
	}
	o.Resolve(*realLag)
	if o.ServerKills > 0 {
		// The server to kill is this very binary, as `limbo serve`.
		bin, err := os.Executable()
		if err != nil {
			return 2, err
		}
		o.ServerBinary = bin
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	o.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sum, err := chaos.Run(ctx, o)
	if err != nil {
		return 2, err
	}
	if err := printJSON(stdout, sum); err != nil {
		return 2, err
	}
	if !sum.Holds() {
		return 1, nil
	}
	return 0, nil
}
