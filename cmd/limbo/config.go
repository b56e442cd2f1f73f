package main

import (
	"context"
	"fmt"
	"os"

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
