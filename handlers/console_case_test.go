package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

var (
	canonicalPre = regexp.MustCompile(`(?s)<pre class="payload canonical">(.*?)</pre>`)
	shownHash    = regexp.MustCompile(`<dt>Payload hash</dt><dd><span class="copyable"><code>([0-9a-f]{64})</code>`)
	redactedMark = regexp.MustCompile(`<mark class="redacted"[^>]*>[^<]*</mark>`)
)

// shownPayload is what a page shows as the payload's canonical bytes (HTML
// unescaped, redacted values replaced by put), and the payload hash it
// shows beside them.
func shownPayload(t *testing.T, page string, put func(string) string) (bytes, hash string) {
	t.Helper()
	m := canonicalPre.FindStringSubmatch(page)
	h := shownHash.FindStringSubmatch(page)
	if m == nil || h == nil {
		t.Fatalf("the page shows no canonical payload with its hash:\n%s", page)
	}
	return html.UnescapeString(redactedMark.ReplaceAllStringFunc(m[1], put)), h[1]
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Both pages show the payload as the bytes that were hashed: unescaped,
// their SHA-256 is the payload hash they show (and the ledger's), the
// key beside them. A redacted member's value is marked in place and not
// shown; put back, the bytes hash to the payload hash again — nothing
// else was changed. Reveal shows the bytes whole.
func TestConsolePayloadAsHashed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServerWith(t, e, consoleSetup{cfg: &review.Config{RedactFields: []string{"card"}}})
		ctx := context.Background()
		// Not canonical as sent: spaces, member order, an escaped slash,
		// numbers written long, markup and characters outside ASCII.
		raw := `{ "z": "<b>a & b</b> \"q\" \/ é 😀", "a": [1.50, 1e21, 0.0000001], "n": {"y": null, "x": true},
			"pay": {"card": "4242424242424242", "amount": 100} }`
		canon, err := review.Canonicalize([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "inv-9", LogicalVersion: "7", Action: "charge",
			Destination: "pay", Risk: review.RiskCompensableWrite, Payload: canon, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if op.PayloadHash != sha(string(canon)) {
			t.Fatalf("the ledger's hash %s is not the canonical bytes' %s", op.PayloadHash, sha(string(canon)))
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordOutcome(ctx, "acme", op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
			Resource: &review.ResourceRef{Ref: "charge-1", Version: "6"}}, "test"); err != nil {
			t.Fatal(err)
		}
		cs, err := st.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cases: %v %+v", err, cs)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		const card = `"4242424242424242"`
		for _, path := range []string{"/operations/" + op.ID, "/cases/" + cs[0].ID} {
			code, page := b.get(path)
			if code != 200 {
				t.Fatalf("%s: %d", path, code)
			}
			if strings.Contains(page, "4242424242424242") {
				t.Errorf("%s shows the redacted card number", path)
			}
			if n := len(redactedMark.FindAllString(page, -1)); n != 1 {
				t.Errorf("%s: %d redacted values marked, want 1 (the card)", path, n)
			}
			shown, hash := shownPayload(t, page, func(string) string { return card })
			if hash != op.PayloadHash || shown != string(canon) || sha(shown) != hash {
				t.Errorf("%s: the bytes shown, the card put back, are not those hashed:\n shown %s (sha %s)\n  want %s (hash shown %s, ledger %s)",
					path, shown, sha(shown), canon, hash, op.PayloadHash)
			}
			if !strings.Contains(page, `data-copy="`+op.Key+`"`) || !strings.Contains(page, `data-copy="`+op.PayloadHash+`"`) {
				t.Errorf("%s: the key or the payload hash is not copyable", path)
			}
		}
		// Revealed: nothing redacted, the bytes as they are hash to the hash shown.
		code, page, _ := b.post("/cases/"+cs[0].ID+"/reveal", url.Values{"csrf": {b.csrf}})
		if code != 200 {
			t.Fatalf("reveal: %d", code)
		}
		if redactedMark.MatchString(page) {
			t.Errorf("the revealed page still marks a redacted value")
		}
		shown, hash := shownPayload(t, page, nil)
		if sha(shown) != hash || hash != op.PayloadHash {
			t.Errorf("revealed: the bytes shown hash to %s, the page shows %s, the ledger holds %s:\n%s", sha(shown), hash, op.PayloadHash, shown)
		}
	})
}

// An operation without a redacted member shows its bytes untouched: they
// hash, unescaped, to the hash shown, with no redaction marked.
func TestConsolePayloadAsHashedUnredacted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		caseID := needsReview(t, st, "doc-hash") // its payload holds markup: escaped, then unescaped
		c, err := st.GetCase(context.Background(), caseID, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := newBrowser(t, srv.URL)
		b.login("support@example.com")
		for _, path := range []string{"/operations/" + c.OperationID, "/cases/" + caseID} {
			_, page := b.get(path)
			if redactedMark.MatchString(page) {
				t.Errorf("%s marks a redacted value where none is configured", path)
			}
			shown, hash := shownPayload(t, page, nil)
			if sha(shown) != hash || !strings.Contains(shown, "<script>") {
				t.Errorf("%s: the bytes shown hash to %s, the page shows %s:\n%s", path, sha(shown), hash, shown)
			}
		}
	})
}

var sectionID = regexp.MustCompile(`<section[^>]* aria-labelledby="([a-z-]+)"`)

// A settled operation reads on its own page as fully as on its case's:
// every section the case page shows of the operation (candidates,
// attempts with their evidence, payload, compensations, history) is on
// the operation page too, with the decisions taken on its case.
func TestConsoleOperationPageAsFullAsTheCase(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		ctx := context.Background()
		caseID := needsReview(t, st, "doc-settled")
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		if code, _, _ := sup.decide(caseID, url.Values{"action": {"compensate"}, "candidate": {"file-doc-settled"},
			"compensation": {"delete the v6 file"}, "reason": {"rendered from the wrong version"}}); code != http.StatusSeeOther {
			t.Fatalf("compensate: %d", code)
		}
		if code, _, _ := sup.decide(caseID, url.Values{"action": {"compensation_done"}, "reason": {"the file is gone"}}); code != http.StatusSeeOther {
			t.Fatalf("compensation_done: %d", code)
		}
		c, _ := st.GetCase(ctx, caseID, nil)
		if op, _ := st.OperationByID(ctx, c.OperationID, nil); op.State != review.Compensated {
			t.Fatalf("the operation is %s, want compensated", op.State)
		}
		_, casePage := sup.get("/cases/" + caseID)
		code, opPage := sup.get("/operations/" + c.OperationID)
		if code != 200 {
			t.Fatalf("operation page: %d", code)
		}
		for _, m := range sectionID.FindAllStringSubmatch(casePage, -1) {
			if id := m[1]; id != "decision-h" && id != "diff-h" && !strings.Contains(opPage, `aria-labelledby="`+id+`"`) {
				t.Errorf("the case page shows section %s, the operation page does not", id)
			}
		}
		for _, want := range []string{`id="attempt-1"`, `<table class="cards evidence">`, "<code>file-doc-settled</code>", `id="compensations-h"`,
			`href="/cases/` + caseID + `"`, "Undo by support@example.com", "Undo done by support@example.com", "the file is gone",
			`data-action="case.resolved">Case resolved</span>`} {
			if !strings.Contains(opPage, want) {
				t.Errorf("the settled operation's page lacks %q", want)
			}
		}
	})
}
