package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestResumeHint: the hint printed for a run left unfinished repeats the
// flags given, so it reaches the same Limbo and sandbox, and never prints
// a token given as a flag: it asks for LIMBO_TOKEN instead.
func TestResumeHint(t *testing.T) {
	t.Setenv("LIMBO_TOKEN", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "limbo_secret", "--limbo", "http://10.0.0.5:9000", "--sandbox", "http://sb:8090", "--run", "release-1"},
			"run it again to resume, with the token in LIMBO_TOKEN (export LIMBO_TOKEN=…): " +
				"go run ./examples/agent --limbo http://10.0.0.5:9000 --sandbox http://sb:8090 --run release-1"},
		{[]string{"--token=limbo_secret", "--release", "v2.0", "--wait-approval", "1m"},
			"run it again to resume, with the token in LIMBO_TOKEN (export LIMBO_TOKEN=…): " +
				"go run ./examples/agent --release v2.0 --wait-approval 1m0s --run release-7"},
		{[]string{"--run", "it's mine"},
			`run it again to resume: go run ./examples/agent --run 'it'\''s mine'`},
	} {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := defineFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		run := *o.run
		if !strings.Contains(strings.Join(c.args, " "), "--run") {
			run = "release-7" // the default is the clock's
		}
		got := resumeHint(fs, run)
		if got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.args, got, c.want)
		}
		if strings.Contains(got, "limbo_secret") {
			t.Errorf("%v: the hint prints the token: %s", c.args, got)
		}
	}
}

// TestQueueURL: the queue is the console's home page, /.
func TestQueueURL(t *testing.T) {
	for _, limbo := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/"} {
		if got := queueURL(limbo); got != "http://127.0.0.1:8080/" {
			t.Errorf("queueURL(%q) = %q", limbo, got)
		}
	}
}
