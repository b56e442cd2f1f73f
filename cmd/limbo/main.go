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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `limbo — the ledger and review desk for operations whose outcome is unknown

Usage:
  limbo serve [--addr 127.0.0.1:8080] [--db URL] [--config FILE] [--demo]
              [--audit-key FILE] [--audit-anchor DIR] [--audit-seal-max D]
  limbo migrate [--db URL]
  limbo token create --tenant NAME [--name LABEL] [--db URL]
  limbo user add --email E --role reviewer|support|manager|admin [--tenants a,b|*] [--db URL]
  limbo audit verify [--db URL] [--audit-key FILE | --pubkey KEY] [--anchor DIR]
                     [--checkpoint FILE] [--max-age D] [--config FILE]
  limbo audit export [--db URL]
  limbo audit keygen [--out FILE]
  limbo audit pubkey [--audit-key FILE] [--db URL] [--config FILE]
  limbo purge --config FILE [--db URL] [--dry-run]      (payload retention, by hand)
  limbo policy lint [--config FILE]                     (every action's policy complete?)
  limbo destination import --openapi FILE_OR_URL --name N [--action A=opId]…
                                                         (see limbo destination import --help)
  limbo sandbox [--addr 127.0.0.1:8090] [fault flags]   (see limbo sandbox --help)
  limbo chaos [fault flags] [--ops N] [--integrators N] [--kills K] [--db URL]
              [--truth-out FILE] [--settle D]            (see limbo chaos --help)
  limbo bench [--db URL] [--duration D] [--concurrency N] [--queue-ops N] [--open-cases M]
                                                         (see limbo bench --help)

--db also reads LIMBO_DB (default sqlite:limbo.db); --addr reads LIMBO_ADDR;
--config reads LIMBO_CONFIG. Database URL: sqlite:PATH or postgres://…
The audit key: --audit-key FILE (or LIMBO_AUDIT_KEY_FILE, audit.key_file), or
the key in LIMBO_AUDIT_KEY; serve on SQLite makes <db file>.audit-key if none.
`

// run dispatches a command line and returns the exit code: 0 success, 1 the
// command's own "no" (a broken audit chain), 2 usage or infrastructure errors.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	code := 0
	switch cmd, rest := args[0], args[1:]; {
	case cmd == "serve":
		err = cmdServe(ctx, rest, stdout, stderr)
	case cmd == "migrate":
		err = cmdMigrate(ctx, rest, stderr)
	case cmd == "token" && len(rest) > 0 && rest[0] == "create":
		err = cmdTokenCreate(ctx, rest[1:], stdout, stderr)
	case cmd == "user" && len(rest) > 0 && rest[0] == "add":
		err = cmdUserAdd(ctx, rest[1:], stdin, stdout, stderr)
	case cmd == "audit" && len(rest) > 0 && rest[0] == "verify":
		code, err = cmdAuditVerify(ctx, rest[1:], stdout, stderr)
	case cmd == "audit" && len(rest) > 0 && rest[0] == "export":
		err = cmdAuditExport(ctx, rest[1:], stdout, stderr)
	case cmd == "audit" && len(rest) > 0 && rest[0] == "keygen":
		err = cmdAuditKeygen(rest[1:], stdout, stderr)
	case cmd == "audit" && len(rest) > 0 && rest[0] == "pubkey":
		err = cmdAuditPubkey(rest[1:], stdout, stderr)
	case cmd == "purge":
		err = cmdPurge(ctx, rest, stdout, stderr)
	case cmd == "policy" && len(rest) > 0 && rest[0] == "lint":
		if err = cmdPolicyLint(rest[1:], stdout, stderr); errors.Is(err, errPolicyGaps) {
			code, err = 1, nil
		}
	case cmd == "destination" && len(rest) > 0 && rest[0] == "import":
		err = cmdDestinationImport(ctx, rest[1:], stdout, stderr)
	case cmd == "sandbox":
		err = cmdSandbox(ctx, rest, stdout, stderr)
	case cmd == "chaos":
		code, err = cmdChaos(ctx, rest, stdout, stderr)
	case cmd == "bench":
		err = cmdBench(ctx, rest, stdout, stderr)
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "limbo: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "limbo: %v\n", err)
		return 2
	}
	return code
}
