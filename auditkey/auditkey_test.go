package auditkey

import (
	"strings"
	"testing"
)

// TestBesideDatabase: a SQLite database's key is beside the file the store
// opens, whatever the URL adds: a query, //localhost/, percent-encoding.
func TestBesideDatabase(t *testing.T) {
	for url, want := range map[string]string{
		"sqlite:/tmp/l.db":                            "/tmp/l.db.audit-key",
		"sqlite:/tmp/l.db?_busy_timeout=5000":         "/tmp/l.db.audit-key",
		"sqlite://localhost/tmp/m.db":                 "/tmp/m.db.audit-key",
		"sqlite:a%20b.db":                             "a b.db.audit-key",
		"sqlite:limbo.db":                             "limbo.db.audit-key",
		"sqlite:x.db?mode=memory":                     "",
		"sqlite:":                                     "",
		"postgres://u:p@127.0.0.1/db?sslmode=disable": "",
	} {
		if got := BesideDatabase(url); got != want {
			t.Errorf("BesideDatabase(%q) = %q, want %q", url, got, want)
		}
	}
}

// TestErrNoneSaysWhichEngine: a SQLite URL that names no file is told so,
// not given PostgreSQL's advice to share one key.
func TestErrNoneSaysWhichEngine(t *testing.T) {
	for _, url := range []string{"sqlite://db.example/x.db", "sqlite::memory:"} {
		if msg := ErrNone(url).Error(); !strings.Contains(msg, "names no SQLite database file") || strings.Contains(msg, "PostgreSQL") {
			t.Errorf("ErrNone(%q) = %q", url, msg)
		}
	}
	if msg := ErrNone("postgres://127.0.0.1/db").Error(); !strings.Contains(msg, "PostgreSQL") {
		t.Errorf("ErrNone(postgres) = %q", msg)
	}
}
