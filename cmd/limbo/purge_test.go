package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestCLIPurge: `limbo purge --dry-run` names what payload retention would
// empty and writes nothing; `limbo purge` empties it; `limbo audit verify`
// still passes. Without --config there is no retention to apply: refused.
func TestCLIPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
			t.Fatalf("migrate: %d %s", code, errOut)
		}
		dir := t.TempDir()
		keyFile := filepath.Join(dir, "audit-key")
		if code, _, errOut := limbo(t, "audit", "keygen", "--out", keyFile); code != 0 {
			t.Fatalf("keygen: %d %s", code, errOut)
		}
		key, err := auditkey.ReadFile(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		st, err := store.Open(ctx, db, store.Options{AuditKey: key, MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		reg := func(s *store.Store, ref string) *review.Operation {
			op, _, err := s.Register(ctx, review.Registration{Tenant: "acme", SourceRef: ref, LogicalVersion: "1", Action: "render",
				Destination: "files", Risk: review.RiskIdempotentWrite, Payload: []byte(`{"email":"ada@example.com"}`), Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			return op
		}
		// An operation confirmed, then made to look 40 days old (the
		// trail's times are not what retention reads), and one just registered.
		old := reg(st, "doc-old")
		if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: old.ID, Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", old.ID, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "f-1"}}, "test"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().Exec(st.DB().Rebind(`UPDATE operations SET updated_at = ? WHERE id = ?`),
			time.Now().UTC().Add(-40*24*time.Hour).Truncate(time.Microsecond), old.ID); err != nil {
			t.Fatal(err)
		}
		fresh := reg(st, "doc-new")

		cfgFile := filepath.Join(dir, "limbo.yaml")
		if err := os.WriteFile(cfgFile, []byte("payload_retention: 720h\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := limbo(t, "purge", "--db", db); code != 2 || !strings.Contains(errOut, "--config") {
			t.Errorf("purge without a config: code %d, stderr %q", code, errOut)
		}
		code, out, errOut := limbo(t, "purge", "--db", db, "--config", cfgFile, "--dry-run")
		if code != 0 || !strings.Contains(out, "would purge the payloads of 1 operations") || !strings.Contains(out, old.ID) || strings.Contains(out, fresh.ID) {
			t.Fatalf("purge --dry-run: code %d, stdout %q, stderr %q", code, out, errOut)
		}
		if op, err := st.GetOperation(ctx, "acme", old.ID, ""); err != nil || op.PayloadPurgedAt != nil || len(op.Payload) == 0 {
			t.Fatalf("after a dry run: %v, purged %v", err, op.PayloadPurgedAt)
		}
		// At a terminal it asks first: anything but "yes" purges nothing.
		for _, answer := range []string{"no\n", "", "y\n"} {
			var o, eb bytes.Buffer
			code := run(ctx, []string{"purge", "--db", db, "--config", cfgFile}, terminal{strings.NewReader(answer)}, &o, &eb)
			if code != 2 || !strings.Contains(o.String(), "this empties the payloads of 1 operations for good") ||
				!strings.Contains(eb.String(), "not confirmed; nothing purged") {
				t.Errorf("purge at a terminal answered %q: exit %d, %q %q", answer, code, o.String(), eb.String())
			}
		}
		if op, err := st.GetOperation(ctx, "acme", old.ID, ""); err != nil || op.PayloadPurgedAt != nil {
			t.Fatalf("after a purge not confirmed: %v, purged %v", err, op.PayloadPurgedAt)
		}
		var yesOut, yesErr bytes.Buffer
		code = run(ctx, []string{"purge", "--db", db, "--config", cfgFile}, terminal{strings.NewReader("yes\n")}, &yesOut, &yesErr)
		out, errOut = yesOut.String(), yesErr.String()
		if code != 0 || !strings.Contains(out, "purged the payloads of 1 operations") || !strings.Contains(out, old.ID) {
			t.Fatalf("purge: code %d, stdout %q, stderr %q", code, out, errOut)
		}
		for id, purged := range map[string]bool{old.ID: true, fresh.ID: false} {
			op, err := st.GetOperation(ctx, "acme", id, "")
			if err != nil || (op.PayloadPurgedAt != nil) != purged || (op.Payload == nil) != purged {
				t.Errorf("%s after the purge: %v, purged at %v, payload %q; want purged %v", id, err, op.PayloadPurgedAt, op.Payload, purged)
			}
		}
		if rep := storetest.Sealed(t, st); !rep.OK {
			t.Fatalf("sealed trail does not verify: %+v", rep)
		}
		if code, out, errOut := limbo(t, "audit", "verify", "--db", db, "--audit-key", keyFile); code != 0 || !strings.Contains(out, "holds") {
			t.Fatalf("audit verify after the purge: code %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// terminal is standard input as a person at a terminal types it.
type terminal struct{ io.Reader }

func (terminal) Terminal() bool { return true }

// TestPurgeAsksOnlyAtATerminal: /dev/null — what systemd, docker run
// without -i and cron give a command — is a character device but no
// terminal: purge run from them does not ask.
func TestPurgeAsksOnlyAtATerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Errorf("%s is taken for a terminal", os.DevNull)
	}
	if isTerminal(strings.NewReader("yes\n")) || !isTerminal(terminal{strings.NewReader("")}) {
		t.Errorf("a pipe is taken for a terminal, or a terminal is not")
	}
}

// TestCLIPurgeReportsPastASkippedRow: a row the purge cannot write (here
// its audit event is refused) is skipped and named, and the rows after it
// are purged. `limbo purge` returned the error alone: it printed no report
// of what it did purge, so the person who ran it could not tell the purge
// from a failure that wrote nothing. It now prints the report, then the
// skipped row, and exits non-zero.
func TestCLIPurgeReportsPastASkippedRow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		db := storetest.URL(t, e)
		if code, _, errOut := limbo(t, "migrate", "--db", db); code != 0 {
			t.Fatalf("migrate: %d %s", code, errOut)
		}
		st, err := store.Open(ctx, db, store.Options{MaxConns: storetest.MaxConns})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		old := func(ref string) *review.Operation {
			op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: ref, LogicalVersion: "1", Action: "render",
				Destination: "files", Risk: review.RiskIdempotentWrite, Payload: []byte(`{"email":"ada@example.com"}`), Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.RecordOutcome(ctx, "acme", op.ID, 1, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
				HTTPStatus: 201, Resource: &review.ResourceRef{Ref: "f-" + ref}}, "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := st.DB().Exec(st.DB().Rebind(`UPDATE operations SET updated_at = ? WHERE id = ?`),
				time.Now().UTC().Add(-40*24*time.Hour).Truncate(time.Microsecond), op.ID); err != nil {
				t.Fatal(err)
			}
			return op
		}
		poisoned, fine := old("doc-poisoned"), old("doc-fine")
		storetest.FailOn(t, st, "INSERT", "audit_events", "NEW.operation_id = '"+poisoned.ID+"'")
		cfgFile := filepath.Join(t.TempDir(), "limbo.yaml")
		if err := os.WriteFile(cfgFile, []byte("payload_retention: 720h\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := limbo(t, "purge", "--db", db, "--config", cfgFile, "--yes")
		if code == 0 || !strings.Contains(errOut, poisoned.ID) {
			t.Errorf("purge past a skipped row: exit %d, stderr %q; want a failure naming %s", code, errOut, poisoned.ID)
		}
		if !strings.Contains(out, "purged the payloads of 1 operations") || !strings.Contains(out, fine.ID) || strings.Contains(out, poisoned.ID+"\n") {
			t.Errorf("purge past a skipped row: stdout %q; want the report of %s purged", out, fine.ID)
		}
		for id, purged := range map[string]bool{fine.ID: true, poisoned.ID: false} {
			if op, err := st.GetOperation(ctx, "acme", id, ""); err != nil || (op.PayloadPurgedAt != nil) != purged {
				t.Errorf("%s after the purge: %v, purged at %v; want purged %v", id, err, op.PayloadPurgedAt, purged)
			}
		}
	})
}
