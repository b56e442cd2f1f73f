package main

import (
	"errors"
	"fmt"

	"github.com/limbo-dev/limbo/review"
)

// errPolicyGaps is policy lint's "no": some action's policy misses an item
// of the production checklist.
var errPolicyGaps = errors.New("policy lint: some actions are not ready for production")

// cmdPolicyLint lists every action whose policy misses an item of the
// production checklist (review.PolicyChecklist), one line per item, and
// answers errPolicyGaps when there is any.
func cmdPolicyLint(args []string, std stdio) error {
	stdout := std.out
	fs := newFlagSet("policy lint", std)
	path := configFlag(fs)
	if help, err := fs.parse(args); help || err != nil {
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
	if len(entries) == 0 {
		// Green on a file that configures nothing would pass a CI step
		// pointed at the wrong file.
		fmt.Fprintf(stdout, "%s: no action is configured (destinations.<d>.actions), so no policy was checked\n", *path)
		return errPolicyGaps
	}
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
