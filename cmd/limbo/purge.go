package main

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	rep, err := st.PurgePayloads(ctx, time.Now(), *dryRun)
	if err != nil {
		return err
	}
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
	return nil
}
