package storetest

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
)

// LogSink is a slog handler for test suites that fails them when a log
// line carries a secret: an API token, a password the suite uses, a
// session id or CSRF token, a session cookie, a bearer header. It keeps
// nothing else: the lines themselves are dropped.
type LogSink struct {
	mu         sync.Mutex
	lines      int
	violations []string
	passwords  []string
	attrs      []slog.Attr
	group      string
	parent     *LogSink
}

// NewLogSink returns a sink that also refuses each of passwords.
func NewLogSink(passwords ...string) *LogSink {
	return &LogSink{passwords: passwords}
}

var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`limbo_[0-9a-f]{64}`),                                         // an API token
	regexp.MustCompile(`(?i)bearer [A-Za-z0-9_.-]{8,}`),                              // an Authorization header
	regexp.MustCompile(`limbo_session=`),                                             // the console's cookie
	regexp.MustCompile(`(^|[^A-Za-z0-9_+/-])[A-Za-z0-9_-]{43}([^A-Za-z0-9_+/=-]|$)`), // a session id or CSRF token (32 random bytes, unpadded base64url; a padded key is a public key)
}

func (s *LogSink) root() *LogSink {
	if s.parent != nil {
		return s.parent.root()
	}
	return s
}

// Enabled: every level is checked, debug included.
func (s *LogSink) Enabled(context.Context, slog.Level) bool { return true }

// Handle checks one line, formatted as JSON with its attributes.
func (s *LogSink) Handle(ctx context.Context, r slog.Record) error {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	if len(s.attrs) > 0 {
		h = h.WithAttrs(s.attrs)
	}
	if s.group != "" {
		h = h.WithGroup(s.group)
	}
	if err := h.Handle(ctx, r); err != nil {
		return err
	}
	line := buf.String()
	root := s.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	root.lines++
	if HoldsSecret(line, root.passwords...) {
		root.violations = append(root.violations, line)
	}
	return nil
}

// HoldsSecret reports whether text (a log line, a command's stderr) holds
// an API token, a bearer header, the session cookie, something shaped as
// a session id or CSRF token, or one of passwords.
func HoldsSecret(text string, passwords ...string) bool {
	for _, p := range secretPatterns {
		if p.MatchString(text) {
			return true
		}
	}
	for _, pw := range passwords {
		if pw != "" && strings.Contains(text, pw) {
			return true
		}
	}
	return false
}

func (s *LogSink) WithAttrs(as []slog.Attr) slog.Handler {
	return &LogSink{parent: s.root(), attrs: append(append([]slog.Attr{}, s.attrs...), as...), group: s.group}
}

func (s *LogSink) WithGroup(name string) slog.Handler {
	return &LogSink{parent: s.root(), attrs: s.attrs, group: name}
}

// Report is how many lines the sink checked and those that held a secret.
func (s *LogSink) Report() (lines int, violations []string) {
	root := s.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	return root.lines, append([]string(nil), root.violations...)
}
