package main

import (
	"context"
	"encoding/json"
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
	st, err := openStore(ctx, s.DB, nil)
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
	st, err := openStore(ctx, s.DB, nil)
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

func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	var s settings
	fs := newFlags("audit verify", stderr, &s)
	anchorFile := fs.String("checkpoint", "", "a checkpoint exported earlier with `limbo audit export`, to check against")
	if err := parse(fs, args); err != nil {
		return 2, err
	}
	var anchor *store.Checkpoint
	if *anchorFile != "" {
		data, err := os.ReadFile(*anchorFile)
		if err != nil {
			return 2, err
		}
		anchor = &store.Checkpoint{}
		if err := json.Unmarshal(data, anchor); err != nil {
			return 2, fmt.Errorf("audit verify: %s: %w", *anchorFile, err)
		}
	}
	st, err := store.Open(ctx, s.DB, store.Options{})
	if err != nil {
		return 2, err
	}
	defer st.Close()
	rep, err := st.VerifyAudit(ctx, anchor)
	if err != nil {
		return 2, err
	}
	if !rep.OK {
		fmt.Fprintf(stderr, "audit chain broken at seq %d: %s\n", rep.BrokenSeq, rep.Problem)
		return 1, nil
	}
	fmt.Fprintf(stdout, "audit chain holds: %d events, %d checkpoints, %d not yet sealed\n", rep.Events, rep.Checkpoints, rep.Unsealed)
	return 0, nil
}

func cmdAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var s settings
	fs := newFlags("audit export", stderr, &s)
	if err := parse(fs, args); err != nil {
		return err
	}
	st, err := store.Open(ctx, s.DB, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := st.LatestCheckpoint(ctx)
	if err != nil {
		return err
	}
	if c == nil {
		return errors.New("audit export: no checkpoint yet")
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

func osUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
