package handlers_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestConsoleAuditSearchAsTyped: the audit search finds what a manager
// types as a person types it, the same on both engines: a field pasted
// with spaces around it, an email in capitals (emails are stored in lower
// case) and an action prefix in capitals. Before, " acme" and
// "Admin@Example.com" found nothing, and "Token" found the token events on
// SQLite (its LIKE ignores case) but nothing on PostgreSQL.
func TestConsoleAuditSearchAsTyped(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		adm := newBrowser(t, srv.URL)
		adm.login("admin@example.com")
		adm.get("/admin/tokens")
		if code, _, _ := adm.post("/admin/tokens", url.Values{"csrf": {adm.csrf}, "tenant": {"acme"}, "name": {"ci"}}); code != http.StatusOK {
			t.Fatalf("create token: %d", code)
		}
		if _, err := st.CreateToken(ctx, review.Operator("cli:Mario"), "acme", "other"); err != nil {
			t.Fatal(err)
		}
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		for _, q := range []url.Values{
			{"tenant": {" acme "}, "action": {"token.created"}},
			{"actor": {"  Admin@Example.com "}, "action": {"token."}},
			{"action": {"Token.Created"}, "actor": {"admin@example.com"}},
		} {
			code, body := mgr.get("/audit?" + q.Encode())
			if code != http.StatusOK || !strings.Contains(body, `title="token.created"`) {
				t.Errorf("/audit?%s: %d, want the token.created event", q.Encode(), code)
			}
			var csv string
			_, csv = mgr.get("/audit.csv?" + q.Encode())
			if n := strings.Count(csv, ",token.created,"); n == 0 {
				t.Errorf("/audit.csv?%s: no token.created row:\n%s", q.Encode(), csv)
			}
		}
		// An actor who is not an email keeps their case.
		if _, body := mgr.get("/audit?actor=cli:Mario"); !strings.Contains(body, `title="token.created"`) {
			t.Error("actor cli:Mario: not found")
		}
	})
}

// TestConsoleAuditCSVFailsLoudly: an export that fails after its first
// rows were sent ends the response without its end, so the download fails
// instead of looking complete. It answered a well-formed CSV of the rows
// read so far, a 200 that said nothing of the rest (a read failing mid-way
// is played by an event whose time no driver reads: "infinity").
func TestConsoleAuditCSVFailsLoudly(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		for i := range 3 {
			if _, err := st.CreateToken(ctx, review.Operator("cli:Mario"), "acme", fmt.Sprintf("t%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		mgr := newBrowser(t, srv.URL)
		mgr.login("manager@example.com")
		// After every event the test makes: its seq is past theirs.
		if _, err := st.DB().Exec(st.DB().Rebind(`INSERT INTO audit_events (seq, txid, at, actor, action, hash)
SELECT COALESCE(MAX(seq), 0) + 1000, 0, 'infinity', 'cli:Mario', 'token.created', 'x' FROM audit_events`)); err != nil {
			t.Fatal(err)
		}
		resp, err := mgr.c.Get(srv.URL + "/audit.csv")
		if err != nil {
			return // failed before the status line: as loud
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Errorf("an export that failed mid-way downloaded whole (%d, %d bytes, %d token rows)", resp.StatusCode, len(body),
				strings.Count(string(body), ",token.created,"))
		}
	})
}

// TestConsoleAuditUserEventsOfMyTenant: a manager of acme reads, in the
// audit history and its export, that a user was given acme, and not that
// a user was given beta. The events about users had no tenant, so only a
// manager of every tenant read them.
func TestConsoleAuditUserEventsOfMyTenant(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		for _, u := range []struct {
			email  string
			role   review.Role
			tenant string
		}{
			{"acme-manager@example.com", review.RoleManager, "acme"},
			{"new-at-acme@example.com", review.RoleReviewer, "acme"},
			{"new-at-beta@example.com", review.RoleReviewer, "beta"},
		} {
			if _, err := st.AddUser(ctx, review.Operator("cli:root"), store.NewUser{Email: u.email, Password: "correct horse battery",
				Role: u.role, Scope: review.Scope{Tenants: []string{u.tenant}}}); err != nil {
				t.Fatal(err)
			}
		}
		mgr := newBrowser(t, srv.URL)
		mgr.login("acme-manager@example.com")
		for _, path := range []string{"/audit?action=user.", "/audit.csv?action=user."} {
			code, body := mgr.get(path)
			if code != http.StatusOK || !strings.Contains(body, "new-at-acme@example.com") || strings.Contains(body, "new-at-beta@example.com") {
				t.Errorf("%s: %d; want acme's new user and not beta's:\n%s", path, code, body)
			}
		}
	})
}

// TestConsoleAuditActionByLabel: the audit search's Action field offers
// every action with its label in the reader's language, and finds an
// action by its label as well as by its code: an Italian manager who types
// "utente aggiunto" (User added) or "TOKEN CREATO" finds those events, on
// the page and in its export, and is told which actions were searched.
// Before, the field took codes only ("user.added"), and "utente" found
// nothing. Both engines.
func TestConsoleAuditActionByLabel(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		if _, err := st.CreateToken(ctx, review.Operator("cli:Mario"), "acme", "ci"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddUser(ctx, review.Operator("cli:Mario"), store.NewUser{Email: "nuova@example.com", Password: "a long enough password",
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"acme"}}}); err != nil {
			t.Fatal(err)
		}
		mgr := newBrowser(t, srv.URL).withHeader("Accept-Language", "it")
		mgr.login("manager@example.com")
		_, page := mgr.get("/audit")
		for _, want := range []string{`list="audit-actions"`, `<datalist id="audit-actions">`,
			`<option value="user.added">Utente aggiunto</option>`, `<option value="decision.compensate">Decisione: Compensa</option>`} {
			if !strings.Contains(page, want) {
				t.Errorf("/audit: no %s", want)
			}
		}
		for _, c := range []struct{ action, finds, hides, hint string }{
			{" utente aggiunto ", "user.added", "token.created", "Azioni cercate: Utente aggiunto."},
			{"TOKEN CREATO", "token.created", "user.added", "Azioni cercate: Token creato."},
			// In English too, and by code as before.
			{"user added", "user.added", "token.created", "Azioni cercate: Utente aggiunto."},
			{"token.cr", "token.created", "user.added", "Azioni cercate: Token creato."},
			{"nessuna", "", "token.created", "Nessuna azione si chiama “nessuna”"},
		} {
			q := url.Values{"action": {c.action}}.Encode()
			code, body := mgr.get("/audit?" + q)
			if code != http.StatusOK {
				t.Fatalf("/audit?%s: %d", q, code)
			}
			if c.finds != "" && !strings.Contains(body, `title="`+c.finds+`"`) {
				t.Errorf("/audit?%s: no %s event", q, c.finds)
			}
			if strings.Contains(body, `title="`+c.hides+`"`) {
				t.Errorf("/audit?%s: shows a %s event", q, c.hides)
			}
			if !strings.Contains(body, html.EscapeString(c.hint)) {
				t.Errorf("/audit?%s: no hint %q", q, c.hint)
			}
			_, csv := mgr.get("/audit.csv?" + q)
			if c.finds != "" && !strings.Contains(csv, ","+c.finds+",") || strings.Contains(csv, ","+c.hides+",") {
				t.Errorf("/audit.csv?%s: want %s rows only:\n%s", q, c.finds, csv)
			}
		}
	})
}
