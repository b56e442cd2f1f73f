package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/limbo-dev/limbo/app"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// settings is the command line's configuration, validated once.
type settings struct {
	Addr   string
	DB     string
	Config string
	Demo   bool
	// MaxConns bounds the database pool (0: the store's default).
	MaxConns int
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envInt is an integer variable, 0 when unset or not a number (the flag
// then names the default).
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// newFlags returns a flag set that prints its errors to stderr.
func newFlags(name string, stderr io.Writer, s *settings) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.DB, "db", envOr("LIMBO_DB", "sqlite:limbo.db"), "database URL: sqlite:PATH or postgres://… (env LIMBO_DB)")
	fs.IntVar(&s.MaxConns, "db-max-conns", envInt("LIMBO_DB_MAX_CONNS"), "most database connections this process opens (env LIMBO_DB_MAX_CONNS; 0: 32 on PostgreSQL, 8 on SQLite)")
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errors.New("see usage above")
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// loadConfig reads the destination configuration file, if any.
func loadConfig(path string) (*review.Config, error) {
	if path == "" {
		return &review.Config{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return review.ParseConfig(data)
}

// openStore opens and migrates the database.
func openStore(ctx context.Context, s settings, opt store.Options) (*store.Store, error) {
	opt.MaxConns = s.MaxConns
	return app.OpenStore(ctx, s.DB, opt)
}
