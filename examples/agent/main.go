// Command agent runs the release-notes agent (package release) against a
// Limbo server and the sandbox:
//
//	go run ./examples/agent --token <token> [--limbo http://127.0.0.1:8080]
//	    [--sandbox http://127.0.0.1:8090] [--run release-1] [--release v1.2]
//	    [--wait-approval 10m]
//
// The server needs the example's policies (examples/agent/release/limbo.yaml,
// or `limbo serve --demo`, which carries them and prints a token). Run it
// again with the same --run to resume: the ledger says what already
// happened, and nothing runs twice.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/examples/agent/release"
)

// options are the command's flags.
type options struct {
	limbo, token, sandbox, run, release *string
	wait                                *time.Duration
}

func defineFlags(fs *flag.FlagSet) options {
	return options{
		limbo:   fs.String("limbo", envOr("LIMBO_URL", "http://127.0.0.1:8080"), "Limbo's address (env LIMBO_URL)"),
		token:   fs.String("token", os.Getenv("LIMBO_TOKEN"), "an API token of the tenant (env LIMBO_TOKEN)"),
		sandbox: fs.String("sandbox", envOr("LIMBO_SANDBOX_URL", "http://127.0.0.1:8090"), "the sandbox's address (env LIMBO_SANDBOX_URL)"),
		run:     fs.String("run", fmt.Sprintf("release-%d", time.Now().Unix()), "the run id: the same id resumes a run"),
		release: fs.String("release", "v1.2", "the release to publish notes for"),
		wait:    fs.Duration("wait-approval", 10*time.Minute, "how long to wait for the notification's approval in the console"),
	}
}

func main() {
	o := defineFlags(flag.CommandLine)
	flag.Parse()
	if *o.token == "" {
		fmt.Fprintln(os.Stderr, "agent: --token (or LIMBO_TOKEN) is required: `limbo serve --demo` prints one")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	a := &release.Agent{
		Limbo:        client.New(*o.limbo, *o.token, client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})),
		Sandbox:      *o.sandbox,
		Log:          slog.New(slog.NewTextHandler(os.Stderr, nil)),
		WaitApproval: *o.wait,
	}
	fmt.Printf("run %s: waiting up to %s for approvals; approve the notification in the console's queue, %s\n",
		*o.run, *o.wait, queueURL(*o.limbo))
	rep, err := a.Run(ctx, *o.run, *o.release)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	fmt.Print(rep)
	if !rep.Done {
		fmt.Println(resumeHint(flag.CommandLine, *o.run))
	}
}

// queueURL is the console's queue, its home page.
func queueURL(limbo string) string { return strings.TrimRight(limbo, "/") + "/" }

// resumeHint says how to run run again: with the flags this command line
// gave (--run always), so it reaches the same Limbo and sandbox. A token
// given as --token is not repeated, not to print it: the hint asks for it
// in LIMBO_TOKEN instead.
func resumeHint(fs *flag.FlagSet, run string) string {
	args := []string{"go", "run", "./examples/agent"}
	tokenFlag := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "token":
			tokenFlag = true
		case "run":
		default:
			args = append(args, "--"+f.Name, shellQuote(f.Value.String()))
		}
	})
	args = append(args, "--run", shellQuote(run))
	if tokenFlag {
		return "run it again to resume, with the token in LIMBO_TOKEN (export LIMBO_TOKEN=…): " + strings.Join(args, " ")
	}
	return "run it again to resume: " + strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,:/@=+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
