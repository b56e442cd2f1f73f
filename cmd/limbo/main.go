// Command limbo is the ledger and review desk for operations whose outcome
// is unknown. See README.md; `limbo help` lists the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/limbo-dev/limbo/bench"
	"github.com/limbo-dev/limbo/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const intro = `limbo — the ledger and review desk for operations whose outcome is unknown

Usage: limbo COMMAND [flags]

Commands:
`

const outro = `
limbo help COMMAND (or limbo COMMAND --help) describes a command and its flags.
Database URL: sqlite:PATH or postgres://… (--db, env LIMBO_DB; default sqlite:limbo.db).
Only serve and migrate create or migrate a database; the other commands
refuse one that is missing or whose schema is not current.
Each flag's environment variable, where it has one, is named in --help: the
command line wins over the environment, the environment over the default.
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, intro)
	printCommands(w, commands)
	fmt.Fprint(w, outro)
}

// commands is every subcommand, in the order `limbo help` lists them.
var commands []command

func init() {
	// (Here rather than in the declaration: help reads commands.)
	commands = []command{
		{"serve", "run the API, the console and the background work", serveUsage,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdServe(ctx, a, std) }},
		{"migrate", "bring the database schema up to date, naming what it applied", `Usage: limbo migrate [--db URL]

Creates the database if it is new (a SQLite file with mode 0600), applies
the migrations it lacks, each in its own transaction, and names each one it
applied. serve migrates on start as well; run this first to upgrade with the
server stopped, or to see what an upgrade changes. The other commands that
open the database never create or migrate it: they refuse a schema that is
not current. A schema a newer Limbo migrated is refused (exit 2): run that
version, or restore the backup taken before it.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdMigrate(ctx, a, std) }},
		{"version", "print the version, the commit it was built from and the Go version", `Usage: limbo version [--json]

Prints the module version, the VCS revision and time this binary was built
from, and the Go version that built it (the same as GET /healthz and the
limbo_build_info metric).`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdVersion(a, std) }},
		{"token create", "create an API token for a tenant (printed once)", `Usage: limbo token create --tenant NAME [--name LABEL] [--db URL]

Creates an API token for the tenant (creating the tenant if new) and prints
it on stdout, alone, once: only its hash is stored.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdTokenCreate(ctx, a, std) }},
		{"user add", "add a console user", `Usage: limbo user add --email E --role reviewer|support|manager|admin [--tenants a,b|*] [--db URL]

Adds a console user. The password is read from the first line of stdin when
stdin is not a terminal; otherwise one is generated and printed once.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdUserAdd(ctx, a, std) }},
		{"user password", "give a console user a new password (their sessions end)", `Usage: limbo user password --email E [--db URL]

Gives the user a new password: read from the first line of stdin when stdin
is not a terminal; otherwise one is generated and printed once. The user's
sessions end, and the reset is audited (user.password_reset).`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdUserPassword(ctx, a, std) }},
		{"audit verify", "verify the audit trail's hash chain and signed checkpoints (exit 1 if broken)", `Usage: limbo audit verify [--db URL] [--audit-key FILE | --pubkey KEY] [--anchor DIR]
                          [--checkpoint FILE] [--max-age D] [--config FILE]

Recomputes the audit trail's hash chain and checks every signed checkpoint
against the audit public key; with --anchor or --checkpoint, also that the
database still holds what those copies prove. Exit 0 when the trail holds,
1 when it does not (what broke is printed), 2 when it could not be checked.`,
			cmdAuditVerify},
		{"audit export", "print the newest signed checkpoint, to keep outside the database", `Usage: limbo audit export [--db URL]

Prints the newest signed audit checkpoint as JSON. Keep it somewhere the
database's administrators cannot write; audit verify --checkpoint FILE
later proves the trail still holds everything it covers.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdAuditExport(ctx, a, std) }},
		{"audit keygen", "make a new audit signing key", `Usage: limbo audit keygen [--out FILE]

Makes a new Ed25519 audit signing key: into FILE (mode 0600, never
overwritten) with its public key printed, or printed for LIMBO_AUDIT_KEY or
a secret store.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdAuditKeygen(a, std) }},
		{"audit pubkey", "print the audit public key", `Usage: limbo audit pubkey [--audit-key FILE] [--db URL] [--config FILE]

Prints the public key of the audit signing key serve would use, for
audit verify --pubkey on a machine that must not hold the private key.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdAuditPubkey(a, std) }},
		{"purge", "empty the payloads payload retention says are due (serve does it every purge_every)", `Usage: limbo purge --config FILE [--db URL] [--dry-run] [--yes]

Empties the payload of every operation that has been terminal for longer
than its retention (payload_retention, or its action's retention), with its
refused payloads, the candidates its evidence listed and its model outputs;
keys, payload hashes, states and the audit trail stay, and audit verify
still passes. Each purge is audited. --dry-run says what it would empty.
Run at a terminal, it says how many payloads it will empty and asks first;
--yes (or a pipe, a file, cron) does not ask. An operation whose purge
fails is skipped (nothing of it written) and the others are purged: the
report says what was, then the error names what was skipped, and the exit
status is not 0.`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdPurge(ctx, a, std) }},
		{"policy lint", "list actions whose policy misses a production checklist item (exit 1 if any)", `Usage: limbo policy lint --config FILE

Lists every action whose policy (destinations.<d>.actions.<a> in the
configuration file) misses an item of the production checklist, and exits 1
when any does, or when the file configures no action (nothing was checked);
0 when every policy is complete.`,
			func(ctx context.Context, a []string, std stdio) (int, error) {
				if err := cmdPolicyLint(a, std); errors.Is(err, errPolicyGaps) {
					return 1, nil
				} else if err != nil {
					return 2, err
				}
				return 0, nil
			}},
		{"destination import", "write a destination's configuration from its OpenAPI document", `Usage: limbo destination import --openapi FILE_OR_URL --name NAME [flags]

Writes the destination block of a configuration file from the destination's
OpenAPI document: status, search, job and history probes from the operations
it marks with x-limbo-probe (or that --status, --search, … name), and the
request schema of each operation an --action is sent as. A registration of
that action whose body breaks the schema is refused with 400, naming the
field, before anything is sent. The block is checked as Limbo checks its
configuration; review it, then add what a document cannot say (honours_keys,
search_lag, undo, …).`,
			func(ctx context.Context, a []string, std stdio) (int, error) {
				return 0, cmdDestinationImport(ctx, a, std)
			}},
		{"sandbox", "run the sandbox destination (files, jobs, a model) with injected faults", sandboxUsage,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdSandbox(ctx, a, std) }},
		{"chaos", "run the fault run against Limbo and check its invariants (exit 1 if one breaks)", chaos.Usage, cmdChaos},
		{"bench", "measure Limbo on this machine (JSON)", bench.Usage,
			func(ctx context.Context, a []string, std stdio) (int, error) { return 0, cmdBench(ctx, a, std) }},
		{"help", "describe a command: limbo help COMMAND", `Usage: limbo help [COMMAND]

Lists the commands, or describes one and its flags, as its --help does:

  limbo help
  limbo help audit verify`,
			func(ctx context.Context, a []string, std stdio) (int, error) { return help(ctx, a, std) }},
	}
}

const serveUsage = `Usage: limbo serve [--addr 127.0.0.1:8080] [--db URL] [--config FILE] [--demo] [flags]

Runs Limbo: the integration API, the review console, /metrics, /healthz and
/readyz, and the background work (lease sweeps, reconciliation, the audit
sealer, webhook deliveries). Creates the database if new and migrates it on
start; refuses a schema a newer Limbo migrated. Logs go to
stderr (--log-format, --log-level), one access line per request.`

// help is limbo help [COMMAND…].
func help(ctx context.Context, args []string, std stdio) (int, error) {
	switch {
	case len(args) == 0:
		printUsage(std.out)
		return 0, nil
	case isHelp(args[0]) || args[0] == "help":
		c, _ := findCommand([]string{"help"})
		fmt.Fprintln(std.out, c.usage)
		return 0, nil
	}
	return dispatch(ctx, append(args, "--help"), std), nil
}

// run dispatches a command line and returns the exit code: 0 success, 1 the
// command's own "no" (a broken audit chain), 2 usage or infrastructure errors.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	std := stdio{in: stdin, out: stdout, err: stderr}
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	if isHelp(args[0]) {
		printUsage(stdout)
		return 0
	}
	return dispatch(ctx, args, std)
}

func dispatch(ctx context.Context, args []string, std stdio) int {
	c, rest := findCommand(args)
	if c == nil {
		// A group's first word alone ("limbo audit"), or with --help.
		if g := group(args[0]); len(g) > 0 {
			w, code := std.err, 2
			if len(args) == 2 && isHelp(args[1]) {
				w, code = std.out, 0
			}
			fmt.Fprintf(w, "limbo %s has these commands:\n", args[0])
			printCommands(w, g)
			return code
		}
		fmt.Fprintf(std.err, "limbo: unknown command %q\n\n", strings.Join(args, " "))
		printUsage(std.err)
		return 2
	}
	code, err := c.run(ctx, rest, std)
	if err != nil {
		fmt.Fprintf(std.err, "limbo: %v\n", err)
		return max(code, 2)
	}
	return code
}
