package main

// The tools beside the product: the sandbox destination, the fault run
// and the benchmark. Each lives in its own package; here are their flags.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"

	"github.com/limbo-dev/limbo/bench"
	"github.com/limbo-dev/limbo/chaos"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdBench(ctx context.Context, args []string, std stdio) error {
	stdout, stderr := std.out, std.err
	fs := newFlagSet("bench", std)
	var o bench.Options
	o.RegisterFlags(fs.FlagSet)
	if help, err := fs.parse(args); help || err != nil {
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
func cmdChaos(ctx context.Context, args []string, std stdio) (int, error) {
	stdout, stderr := std.out, std.err
	fs := newFlagSet("chaos", std)
	var o chaos.Options
	realLag := o.RegisterFlags(fs.FlagSet)
	verbose := fs.Bool("verbose", false, "log every reconciliation and worker event to stderr")
	help, err := fs.parse(args)
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
