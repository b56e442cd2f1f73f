package main

// The command line's frame: the list of commands, their help, and flags
// that also read the environment. Each command's own file defines its
// flags and does its work; nothing else needs to know about help or
// environment variables.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// stdio is what a command reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand of limbo.
type command struct {
	name    string // its words: "audit verify"
	summary string // its line in `limbo help`
	// usage is the synopsis and what the command does, for its --help
	// (the flags are listed after it).
	usage string
	run   func(ctx context.Context, args []string, o stdio) (int, error)
}

// errHelp: the command printed its help as asked; it succeeds.
var errHelp = errors.New("help shown")

// findCommand is the command args start with, and the arguments after
// its words; nil when none matches.
func findCommand(args []string) (*command, []string) {
	var best *command
	var rest []string
	for i := range commands {
		c := &commands[i]
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name && (best == nil || len(words) > len(strings.Fields(best.name))) {
			best, rest = c, args[len(words):]
		}
	}
	return best, rest
}

// group lists the commands whose name starts with prefix ("audit").
func group(prefix string) []command {
	var out []command
	for _, c := range commands {
		if strings.HasPrefix(c.name, prefix+" ") {
			out = append(out, c)
		}
	}
	return out
}

// printCommands writes the command list.
func printCommands(w io.Writer, cs []command) {
	width := 0
	for _, c := range cs {
		width = max(width, len(c.name))
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  limbo %-*s  %s\n", width, c.name, c.summary)
	}
}

// flags is a command's flag set: flag.FlagSet, plus the environment
// variable each flag also reads. Precedence: the command line, then the
// environment, then the default. A variable's value is parsed as the flag
// would parse it (a bool by strconv.ParseBool, a duration by
// time.ParseDuration…), so a bad value is an error, never ignored.
type flags struct {
	*flag.FlagSet
	o   stdio
	env map[string]string // flag name → variable
}

func newFlagSet(name string, o stdio) *flags {
	fs := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), o: o, env: map[string]string{}}
	// The flag package would print its error before parse returns it;
	// dispatch prints it once, in this command line's words (flagError).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse prints the help, where it belongs
	return fs
}

// newFlags is newFlagSet with the database flags every command that
// opens the database has.
func newFlags(name string, o stdio, s *settings) *flags {
	fs := newFlagSet(name, o)
	fs.StringVar(&s.DB, "db", "sqlite:limbo.db", "database URL: sqlite:PATH or postgres://…")
	fs.IntVar(&s.MaxConns, "db-max-conns", 0, "most database connections this process opens (0: 32 on PostgreSQL, 8 on SQLite)")
	fs.bindEnv("db", "LIMBO_DB")
	fs.bindEnv("db-max-conns", "LIMBO_DB_MAX_CONNS")
	return fs
}

// bindEnv makes flag name also read the environment variable v.
func (fs *flags) bindEnv(name, v string) {
	if fs.Lookup(name) == nil {
		panic("bindEnv: no flag " + name)
	}
	fs.env[name] = v
}

// parse reads args, then the environment for the flags args did not set.
// help is true when --help was asked for: the help is printed to stdout
// and the command has nothing more to do. A mistake prints the help to
// stderr after the error.
func (fs *flags) parse(args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.printHelp(fs.o.out)
			return true, nil
		}
		fs.printHelp(fs.o.err)
		fmt.Fprintln(fs.o.err)
		return false, flagError(fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("%s: unexpected argument %q (see limbo %s --help)", fs.Name(), fs.Arg(0), fs.Name())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var bad error
	fs.VisitAll(func(f *flag.Flag) {
		v, ok := fs.env[f.Name]
		if !ok || set[f.Name] || bad != nil {
			return
		}
		if val, present := os.LookupEnv(v); present && val != "" {
			if err := fs.Set(f.Name, val); err != nil {
				bad = fmt.Errorf("%s: environment %s=%q: %v", fs.Name(), v, val, err)
			}
		}
	})
	return false, bad
}

// singleDash is a flag named the flag package's way, "-db", at the start
// of the message or after a space.
var singleDash = regexp.MustCompile(`(^|\s)-([a-z])`)

// flagError is a parse error of the flag package as this command line
// says it: flags with two dashes, as the help lists them, and where to
// look ("flag provided but not defined: -bogus" reads "audit verify: flag
// provided but not defined: --bogus (see limbo audit verify --help)").
func flagError(name string, err error) error {
	return fmt.Errorf("%s: %s (see limbo %s --help)", name, singleDash.ReplaceAllString(err.Error(), "$1--$2"), name)
}

// printHelp writes the command's usage and description, then each flag
// with its default and its environment variable.
func (fs *flags) printHelp(w io.Writer) {
	if c, _ := findCommand(strings.Fields(fs.Name())); c != nil {
		// (The tools' usage texts end with their own "Flags:".)
		fmt.Fprint(w, strings.TrimRight(strings.TrimSuffix(strings.TrimRight(c.usage, "\n"), "Flags:"), "\n")+"\n")
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if kind != "" {
			head += " " + kind
		}
		var notes []string
		// A flag whose usage says its default itself has a sentinel
		// value (-1: "a fifth of --duration"), not one to show.
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" && !strings.Contains(usage, "(default") {
			notes = append(notes, "default "+quoteIfString(f))
		}
		if v, ok := fs.env[f.Name]; ok {
			notes = append(notes, "env "+v)
		}
		if len(notes) > 0 {
			usage += " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(w, "%s\n      %s\n", head, usage)
	})
}

func quoteIfString(f *flag.Flag) string {
	if kind, _ := flag.UnquoteUsage(f); kind == "string" {
		return fmt.Sprintf("%q", f.DefValue)
	}
	return f.DefValue
}

// isHelp: the argument asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }
