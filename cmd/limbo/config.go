package main

import (
	"context"
	"errors"
	"fmt"
	"os"

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

// loadConfig reads the destination configuration file, if any.
func loadConfig(path string) (*review.Config, error) {
	if path == "" {
		return &review.Config{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := review.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err) // which file, when several are about
	}
	return cfg, nil
}

// openStore opens, for an admin command, a Limbo database that exists and
// whose schema is current. It neither creates nor migrates one: only serve
// and migrate do, so a mistyped --db is not a new, empty database, and a
// newer limbo used for routine work does not upgrade the schema under
// older servers still running on it.
func openStore(ctx context.Context, s settings, opt store.Options) (*store.Store, error) {
	opt.MaxConns = s.MaxConns
	opt.Existing = true
	st, err := store.Open(ctx, s.DB, opt)
	if err == nil {
		if err = st.CheckSchema(ctx); err != nil {
			st.Close()
		}
	}
	if errors.Is(err, store.ErrNoDatabase) {
		return nil, fmt.Errorf("%w; give --db or LIMBO_DB, or run limbo migrate to create one", err)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}
