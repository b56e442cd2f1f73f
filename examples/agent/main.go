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
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/examples/agent/release"
)

func main() {
	limboURL := flag.String("limbo", envOr("LIMBO_URL", "http://127.0.0.1:8080"), "Limbo's address (env LIMBO_URL)")
	token := flag.String("token", os.Getenv("LIMBO_TOKEN"), "an API token of the tenant (env LIMBO_TOKEN)")
	sandboxURL := flag.String("sandbox", envOr("LIMBO_SANDBOX_URL", "http://127.0.0.1:8090"), "the sandbox's address (env LIMBO_SANDBOX_URL)")
	runID := flag.String("run", fmt.Sprintf("release-%d", time.Now().Unix()), "the run id: the same id resumes a run")
	version := flag.String("release", "v1.2", "the release to publish notes for")
	wait := flag.Duration("wait-approval", 10*time.Minute, "how long to wait for the notification's approval in the console")
	flag.Parse()
	if *token == "" {
		fmt.Fprintln(os.Stderr, "agent: --token (or LIMBO_TOKEN) is required: `limbo serve --demo` prints one")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	a := &release.Agent{
		Limbo:        client.New(*limboURL, *token, client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second})),
		Sandbox:      *sandboxURL,
		Log:          slog.New(slog.NewTextHandler(os.Stderr, nil)),
		WaitApproval: *wait,
	}
	fmt.Printf("run %s: waiting up to %s for approvals; approve the notification at %s/queue\n", *runID, *wait, *limboURL)
	rep, err := a.Run(ctx, *runID, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	fmt.Print(rep)
	if !rep.Done {
		fmt.Printf("run it again to resume: go run ./examples/agent --run %s\n", *runID)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
