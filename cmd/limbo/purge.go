package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/limbo-dev/limbo/store"
)

// cmdPurge empties the payloads payload retention says are due
// (store.PurgePayloads), or with --dry-run says what it would empty. serve
// runs the same purge every purge_every; this is for a run by hand.
func cmdPurge(ctx context.Context, args []string, std stdio) error {
	stdout := std.out
	var s settings
	fs := newFlags("purge", std, &s)
	cfgPath := configFlag(fs)
	dryRun := fs.Bool("dry-run", false, "say what would be purged; write nothing")
	yes := fs.Bool("yes", false, "purge without asking first (it asks only when run at a terminal)")
	if help, err := fs.parse(args); help || err != nil {
		return err
	}
	if *cfgPath == "" {
		return errors.New("purge: --config is required: the retention is in the configuration (payload_retention, and each action's retention)")
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, s, store.Options{Config: cfg})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	if !*dryRun && !*yes && isTerminal(std.in) {
		// By hand at a terminal, a retention typed wrong empties payloads
		// for good: say how many first. The same now, so the purge takes
		// the operations counted.
		rep, err := st.PurgePayloads(ctx, now, true)
		if err != nil {
			return err
		}
		if rep.Operations == 0 {
			fmt.Fprintln(stdout, "no payload is due for purging")
			return nil
		}
		fmt.Fprintf(stdout, "this empties the payloads of %d operations for good (retention from %s); type yes to go on: ", rep.Operations, *cfgPath)
		answer, _ := bufio.NewReader(std.in).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			return errors.New("purge: not confirmed; nothing purged (--dry-run lists them, --yes skips this question)")
		}
	}
	rep, err := st.PurgePayloads(ctx, now, *dryRun)
	var skipped *store.SkippedRows
	if err != nil && !errors.As(err, &skipped) {
		return err
	}
	// Rows that failed were skipped (rolled back, named in err): what
	// was purged still is, and the report says so before the error.
	verb := "purged"
	if *dryRun {
		verb = "would purge"
	}
	fmt.Fprintf(stdout, "%s the payloads of %d operations (%d refused payloads, %d evidence rows' candidates, %d model outputs)\n",
		verb, rep.Operations, rep.RejectedPayloads, rep.Evidence, rep.Outputs)
	for _, id := range rep.IDs {
		fmt.Fprintln(stdout, id)
	}
	if n := rep.Operations - len(rep.IDs); n > 0 {
		fmt.Fprintf(stdout, "… and %d more\n", n)
	}
	return err
}

// isTerminal says whether in is a terminal a person types at (not a pipe,
// a file or cron's nothing): only then does purge ask first.
func isTerminal(in io.Reader) bool {
	if t, ok := in.(interface{ Terminal() bool }); ok {
		return t.Terminal() // a reader that says (the tests' person at a terminal)
	}
	// A real terminal (term.IsTerminal asks the terminal driver), not
	// any character device: systemd, docker run without -i and cron give
	// /dev/null, which is one.
	f, ok := in.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
