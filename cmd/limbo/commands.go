package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

func cmdMigrate(ctx context.Context, args []string, stderr io.Writer) error {
	var s settings
	fs := newFlags("migrate", stderr, &s)
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := openStore(ctx, s, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintln(stderr, "limbo: schema is up to date")
	return nil
}

func cmdTokenCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("token create", stderr, &s)
	tenant := fs.String("tenant", "", "tenant the token belongs to (created if new)")
	name := fs.String("name", "", "label for the token")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return errors.New("token create: --tenant is required")
	}
	if *name == "" {
		*name = "cli"
	}
	st, err := openStore(ctx, s, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	token, err := st.CreateToken(ctx, review.Operator("cli:"+osUser()), *tenant, *name)
	if err != nil {
		return err
	}
	// The token alone on stdout, so scripts can capture it.
	fmt.Fprintln(stdout, token)
	return nil
}

func osUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
