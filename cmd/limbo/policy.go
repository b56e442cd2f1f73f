package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/limbo-dev/limbo/review"
)

// errPolicyGaps is policy lint's "no": some action's policy misses an item
// of the production checklist.
var errPolicyGaps = errors.New("policy lint: some actions are not ready for production")

// cmdPolicyLint lists every action whose policy misses an item of the
// production checklist (review.PolicyChecklist), one line per item, and
// answers errPolicyGaps when there is any.
func cmdPolicyLint(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("policy lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", envOr("LIMBO_CONFIG", ""), "configuration file (env LIMBO_CONFIG)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limbo policy lint [--config FILE]

Lists every action whose policy (destinations.<d>.actions.<a> in the
configuration file) misses an item of the production checklist, and exits 1
when any does; 0 when every policy is complete.

`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("policy lint: --config FILE (or LIMBO_CONFIG) names the configuration file to check")
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	entries := review.Catalog(cfg)
	gaps := review.LintPolicies(cfg)
	for _, g := range gaps {
		for _, it := range g.Missing {
			fmt.Fprintf(stdout, "%s: destination %q action %q: %s missing: %s\n", *path, g.Destination, g.Action, it.Name, it.Hint)
		}
	}
	if len(gaps) > 0 {
		fmt.Fprintf(stdout, "%d of %d actions miss checklist items\n", len(gaps), len(entries))
		return errPolicyGaps
	}
	fmt.Fprintf(stdout, "%d actions, every policy complete\n", len(entries))
	return nil
}
