package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/limbo-dev/limbo/buildinfo"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

func cmdMigrate(ctx context.Context, args []string, std stdio) error {
	stderr := std.err
	var s settings
	fs := newFlags("migrate", std, &s)
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	st, err := store.Open(ctx, s.DB, store.Options{MaxConns: s.MaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	// Each migration as it goes: on an upgrade one may build an index over
	// a large table for minutes.
	applied, err := st.MigrateReporting(ctx, func(m store.MigrationStep) {
		switch {
		case !m.Upgrade && m.Done:
			fmt.Fprintf(stderr, "limbo: applied %s\n", m.Name)
		case !m.Upgrade:
		case !m.Done && m.Concurrently:
			fmt.Fprintf(stderr, "limbo: applying %s (building its indexes concurrently: the instances already serving go on writing)\n", m.Name)
		case !m.Done:
			fmt.Fprintf(stderr, "limbo: applying %s\n", m.Name)
		default:
			fmt.Fprintf(stderr, "limbo: applied %s in %s\n", m.Name, m.Took.Round(time.Millisecond))
		}
	})
	if err != nil {
		return err
	}
	switch len(applied) {
	case 0:
		fmt.Fprintln(stderr, "limbo: the schema was up to date; nothing applied")
	case 1:
		fmt.Fprintln(stderr, "limbo: applied 1 migration; the schema is up to date")
	default:
		fmt.Fprintf(stderr, "limbo: applied %d migrations; the schema is up to date\n", len(applied))
	}
	return nil
}

// cmdVersion prints this binary's build (buildinfo), as text or JSON.
func cmdVersion(args []string, std stdio) error {
	fs := newFlagSet("version", std)
	asJSON := fs.Bool("json", false, "print it as one JSON object")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	v := buildinfo.Read()
	if *asJSON {
		return printJSON(std.out, v)
	}
	rev := v.Revision
	if rev == "" {
		rev = "unknown"
	} else if v.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(std.out, "limbo %s\nrevision %s", v.Version, rev)
	if v.Time != "" {
		fmt.Fprintf(std.out, " (%s)", v.Time)
	}
	fmt.Fprintf(std.out, "\n%s\n", v.GoVersion)
	return nil
}

func cmdTokenCreate(ctx context.Context, args []string, std stdio) error {
	stdout := std.out
	var s settings
	fs := newFlags("token create", std, &s)
	tenant := fs.String("tenant", "", "tenant the token belongs to (created if new)")
	name := fs.String("name", "", "label for the token")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if *tenant == "" {
		return errors.New("token create: --tenant is required")
	}
	if *name == "" {
		*name = "cli"
	}
	if _, err := store.CheckNewToken(*tenant, *name); err != nil {
		return fmt.Errorf("token create: %w", err)
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
