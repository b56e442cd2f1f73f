package handlers_test

import (
	"context"
	"fmt"
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
	formTag     = regexp.MustCompile(`(?s)<form[^>]*>.*?</form>`)
	hiddenInput = regexp.MustCompile(`<input[^>]*type="hidden"[^>]*>`)
	inputName   = regexp.MustCompile(`\bname="([^"]*)"`)
	inputValue  = regexp.MustCompile(`\bvalue="([^"]*)"`)
	applyButton = regexp.MustCompile(`Apply to ([0-9]+) cases?`)
)

// bulkConfirmForm is what the preview's confirm form posts: its hidden
// inputs (the form that carries confirm=1), as the browser would send
// them. It fails the test when the preview has no such form.
func bulkConfirmForm(t *testing.T, preview string) url.Values {
	t.Helper()
	for _, f := range formTag.FindAllString(preview, -1) {
		if !strings.Contains(f, `name="confirm"`) {
			continue
		}
		form := url.Values{}
		for _, in := range hiddenInput.FindAllString(f, -1) {
			n, v := inputName.FindStringSubmatch(in), inputValue.FindStringSubmatch(in)
			if n == nil {
				continue
			}
			val := ""
			if v != nil {
				val = html.UnescapeString(v[1])
			}
			form.Add(html.UnescapeString(n[1]), val)
		}
		return form
	}
	t.Fatalf("the preview has no confirm form")
	return nil
}

// applyCount is the number the preview's "Apply to N cases" button says.
func applyCount(t *testing.T, preview string) int {
	t.Helper()
	m := applyButton.FindStringSubmatch(preview)
	if m == nil {
		t.Fatalf("the preview has no “Apply to N cases” button")
	}
	var n int
	fmt.Sscan(m[1], &n)
	return n
}

// TestBulkPreviewConfirmsOnlyListedCases: applying a bulk preview
// decides exactly the cases it listed, each only at the versions it
// showed: a case that changed since is skipped, saying so, and a case
// that came to match the filter after the preview is left alone.
func TestBulkPreviewConfirmsOnlyListedCases(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		listed := []string{needsReview(t, st, "p-1"), needsReview(t, st, "p-2"), needsReview(t, st, "p-3")}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		code, preview, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "reason_filter": {"version_mismatch"}, "action": {"fail"},
			"reason": {"wrong version rendered"}})
		if code != http.StatusOK || !strings.Contains(preview, "3 open cases match") {
			t.Fatalf("preview: %d, want 3 cases listed", code)
		}
		if n := applyCount(t, preview); n != 3 {
			t.Fatalf("the preview offers to apply to %d cases, want the 3 it lists", n)
		}
		confirm := bulkConfirmForm(t, preview)
		if got := len(confirm["case"]); got != 3 {
			t.Errorf("the confirm form carries %d cases, want the 3 listed", got)
		}

		// After the preview: a fourth case comes to match the filter, and
		// one listed case is claimed and released (a new version).
		late := needsReview(t, st, "p-4")
		if _, err := st.ClaimCase(ctx, listed[1], review.Principal{Name: "reviewer@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ReleaseCase(ctx, listed[1], review.Principal{Name: "reviewer@example.com"}, nil); err != nil {
			t.Fatal(err)
		}

		code, body, _ := sup.post("/bulk", confirm)
		if code != http.StatusOK || !strings.Contains(body, "Applied to 2 cases; 1 skipped.") {
			t.Errorf("apply: %d, want 2 applied and 1 skipped", code)
		}
		if !strings.Contains(body, "changed since the preview") {
			t.Errorf("the skipped case does not say it changed since the preview")
		}
		if strings.Contains(body, late) {
			t.Errorf("the result lists %s, which the preview did not", late)
		}
		for _, id := range []string{listed[0], listed[2]} {
			if c, _ := st.GetCase(ctx, id, nil); c.Status != store.CaseResolved || c.Resolution != review.DecideFail {
				t.Errorf("listed case %s: %s %s, want resolved by fail", id, c.Status, c.Resolution)
			}
		}
		for _, id := range []string{listed[1], late} {
			if c, _ := st.GetCase(ctx, id, nil); c.Status != store.CaseOpen {
				t.Errorf("case %s was decided (%s), though the preview did not show it as it is", id, c.Resolution)
			}
		}

		// The same confirm sent again decides nothing more.
		code, body, _ = sup.post("/bulk", confirm)
		if code != http.StatusOK || !strings.Contains(body, "Applied to 0 cases; 3 skipped.") {
			t.Fatalf("the confirm sent again: %d, want nothing applied", code)
		}
	})
}

// TestBulkPreviewApplyCountIsListed: when more cases match than a bulk
// decision takes, the preview lists the first bulkLimit (500), and its
// button counts the listed cases it would decide — the ones its form
// carries — not every match.
func TestBulkPreviewApplyCountIsListed(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		if err := st.BulkLoad(context.Background(), 501, 501); err != nil {
			t.Fatal(err)
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		code, preview, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {"clear the backlog"}})
		if code != http.StatusOK || !strings.Contains(preview, "501 open cases match") {
			t.Fatalf("preview: %d, want 501 matching", code)
		}
		if rows := strings.Count(preview, `<a href="/cases/`); rows != 500 {
			t.Errorf("the preview lists %d cases, want 500", rows)
		}
		carried := len(bulkConfirmForm(t, preview)["case"])
		if n := applyCount(t, preview); n != carried || n == 0 || n > 500 {
			t.Errorf("the button applies to %d cases; its form carries %d (at most 500)", n, carried)
		}
		if !strings.Contains(preview, "Only the first 500 are listed") {
			t.Errorf("the preview does not say it lists only the first 500 of 501")
		}
	})
}

// TestBulkPreviewForgedConfirm: a confirm whose list of cases is missing,
// too long or malformed is refused with a 400 that says why, and decides
// nothing; a case outside the user's scope, or none at all, is skipped
// as not found, never decided.
func TestBulkPreviewForgedConfirm(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		id := needsReview(t, st, "f-1")
		c, _ := st.GetCase(ctx, id, nil)
		op, _ := st.OperationByID(ctx, c.OperationID, nil)
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		base := func() url.Values {
			return url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {"forged list"}, "confirm": {"1"}}
		}
		huge := make([]string, 5000)
		for i := range huge {
			huge[i] = fmt.Sprintf("case_%d:1:1", i)
		}
		for name, cases := range map[string][]string{
			"no cases (an older form)": nil,
			"5000 cases":               huge,
			"no versions":              {id},
			"version zero":             {id + ":0:1"},
			"negative version":         {fmt.Sprintf("%s:%d:-1", id, c.Version)},
			"version not a number":     {id + ":x:1"},
			"version too big":          {id + ":99999999999999999999999:1"},
			"empty id":                 {":1:1"},
			"id with odd characters":   {"<script>:1:1"},
			"id too long":              {strings.Repeat("c", 300) + ":1:1"},
			"a case twice":             {fmt.Sprintf("%s:%d:%d", id, c.Version, op.Version), fmt.Sprintf("%s:%d:%d", id, c.Version, op.Version)},
		} {
			form := base()
			for _, v := range cases {
				form.Add("case", v)
			}
			code, body, _ := sup.post("/bulk", form)
			if code != http.StatusBadRequest || !strings.Contains(body, "list the cases again") {
				t.Errorf("%s: %d, want 400 saying to list the cases again", name, code)
			}
		}
		if got, _ := st.GetCase(ctx, id, nil); got.Status != store.CaseOpen {
			t.Fatalf("a refused confirm decided %s", id)
		}

		// Another tenant's reviewer names the case at its right versions:
		// skipped as not found, not decided; so is an id that is no case.
		if _, err := st.AddUser(ctx, review.Operator("test"), store.NewUser{Email: "other@example.com", Password: "correct horse battery",
			Role: review.RoleReviewer, Scope: review.Scope{Tenants: []string{"other"}}}); err != nil {
			t.Fatal(err)
		}
		o := newBrowser(t, srv.URL)
		o.login("other@example.com")
		form := url.Values{"csrf": {o.csrf}, "action": {"fail"}, "reason": {"not mine"}, "confirm": {"1"},
			"case": {fmt.Sprintf("%s:%d:%d", id, c.Version, op.Version), "case_nosuchcase:1:1"}}
		code, body, _ := o.post("/bulk", form)
		if code != http.StatusOK || !strings.Contains(body, "Applied to 0 cases; 2 skipped.") || !strings.Contains(body, "not found among the cases you may see") {
			t.Fatalf("another tenant's case in a confirm: %d, want it skipped as not found:\n%s", code, body)
		}
		if got, _ := st.GetCase(ctx, id, nil); got.Status != store.CaseOpen {
			t.Fatalf("another tenant's reviewer decided %s through a bulk confirm", id)
		}
	})
}

// TestBulkPreviewLongReason: the reason a bulk decision records ends in
// " (bulk)": a reason too long for that is refused at the preview, with
// the form kept, and the longest the form takes is applied.
func TestBulkPreviewLongReason(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		id := needsReview(t, st, "r-1")
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		if _, queue := sup.get("/"); !strings.Contains(queue, `name="reason" maxlength="1993"`) {
			t.Errorf("the bulk form's reason does not stop at 1993 characters")
		}
		long := strings.Repeat("r", 1995)
		code, body, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {long}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "at most 1,993 characters") || !strings.Contains(body, long) {
			t.Fatalf("a 1995-character bulk reason: %d, want 422 saying at most 1,993, with the reason kept", code)
		}
		if strings.Contains(body, `name="confirm"`) {
			t.Fatalf("a refused bulk reason still offers to apply")
		}
		longest := strings.Repeat("é", 1993)
		code, preview, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "action": {"fail"}, "reason": {longest}})
		if code != http.StatusOK {
			t.Fatalf("a 1993-character bulk reason: %d, want its preview", code)
		}
		code, body, _ = sup.post("/bulk", bulkConfirmForm(t, preview))
		if code != http.StatusOK || !strings.Contains(body, "Applied to 1 case; 0 skipped.") {
			t.Fatalf("apply a 1993-character bulk reason: %d:\n%s", code, body)
		}
		ds, _ := st.CaseDecisions(ctx, id)
		if len(ds) != 1 || ds[0].Reason != longest+" (bulk)" {
			t.Fatalf("decisions %+v, want one with the reason and (bulk)", ds)
		}
	})
}

// TestBulkPreviewRefusalKeepsInput: a bulk form refused (a compensate
// without what is undone) comes back as a form, 422, with the filter,
// action and reason as typed and the refusal beside them, in the
// reader's language.
func TestBulkPreviewRefusalKeepsInput(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		srv, st := consoleServer(t, e)
		needsReview(t, st, "k-1")
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		// Under the queue, the bulk form's action is each case's
		// recommendation until the user picks another.
		if _, queue := sup.get("/"); !regexp.MustCompile(`<select id="bulk-action" name="action"><option value="recommended" selected>`).MatchString(queue) {
			t.Error("the queue's bulk form does not start on each case's recommendation")
		}
		form := url.Values{"csrf": {sup.csrf}, "tenant": {"acme"}, "reason_filter": {"version_mismatch"}, "action": {"compensate"},
			"compensation": {"  "}, "reason": {"undo the <stray> renders"}}
		code, body, _ := sup.post("/bulk", form)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("a bulk compensate without what is undone: %d, want 422", code)
		}
		for _, want := range []string{
			"Say what is undone, and how, for a bulk compensate.",
			`name="tenant" value="acme"`,
			`name="reason_filter" value="version_mismatch"`,
			`<option value="compensate" selected>`,
			"undo the &lt;stray&gt; renders</textarea>",
			`action="/bulk"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the refused bulk form lacks %s", want)
			}
		}
		if strings.Contains(body, `name="confirm"`) {
			t.Errorf("a refused bulk form offers to apply")
		}
		// A bad action too is the form again, not an error page.
		form.Set("action", "approve_retry")
		if code, body, _ = sup.post("/bulk", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "undo the &lt;stray&gt; renders</textarea>") {
			t.Errorf("a bulk approve_retry: %d, want the form again (422)", code)
		}
		// In Italian.
		form.Set("action", "compensate")
		code, body, _ = sup.postWith("/bulk", form, http.Header{"Accept-Language": {"it"}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "Per una compensazione in blocco, indica cosa viene compensato, e come.") {
			t.Errorf("the refusal in Italian: %d", code)
		}
	})
}

// TestBulkPreviewSkipsWhatTheStateRefuses: a case whose operation's
// state does not take the bulk decision — here a fail on an operation
// compensating, whose case takes only the word on its undo — is listed as
// skipped, saying why, and not counted in "Apply to N cases" nor carried
// by the confirm form: the preview does not offer what applying refuses.
func TestBulkPreviewSkipsWhatTheStateRefuses(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		plain := needsReview(t, st, "s-1")
		undoing := needsReview(t, st, "s-2")
		if _, err := st.Decide(ctx, store.DecisionRequest{CaseID: undoing, Action: review.DecideCompensate, Ref: "file-s-2",
			Compensation: "delete it", Reason: "wrong version rendered", Actor: "support@example.com"}); err != nil {
			t.Fatal(err)
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		code, preview, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "reason_filter": {"version_mismatch"}, "action": {"fail"},
			"reason": {"wrong version rendered"}})
		if code != http.StatusOK || !strings.Contains(preview, "2 open cases match") {
			t.Fatalf("preview: %d, want both cases listed", code)
		}
		if n := applyCount(t, preview); n != 1 {
			t.Errorf("the preview offers to apply to %d cases, want 1: the compensating one does not take fail", n)
		}
		if !strings.Contains(preview, "does not apply to the case in its operation&#39;s current state") {
			t.Errorf("the preview does not say why the compensating case is skipped")
		}
		confirm := bulkConfirmForm(t, preview)
		if got := confirm["case"]; len(got) != 1 || !strings.HasPrefix(got[0], plain+":") {
			t.Errorf("the confirm form carries %v, want only %s", got, plain)
		}
		code, body, _ := sup.post("/bulk", confirm)
		if code != http.StatusOK || !strings.Contains(body, "Applied to 1 case; 0 skipped.") {
			t.Errorf("apply: %d, want the one case listed applied", code)
		}
		if c, _ := st.GetCase(ctx, undoing, nil); c.Status != store.CaseOpen {
			t.Errorf("the compensating case was decided by a bulk fail (%s)", c.Resolution)
		}
	})
}

// TestBulkPreviewSkipsHeldCases: a case another person holds is listed
// as skipped, naming the holder, and not offered to apply: only the
// holder decides it (applying would refuse it). A case the user holds
// is decided.
func TestBulkPreviewSkipsHeldCases(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		srv, st := consoleServer(t, e)
		free := needsReview(t, st, "h-1")
		held := needsReview(t, st, "h-2")
		mine := needsReview(t, st, "h-3")
		if _, err := st.ClaimCase(ctx, held, review.Principal{Name: "reviewer@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ClaimCase(ctx, mine, review.Principal{Name: "support@example.com"}, nil); err != nil {
			t.Fatal(err)
		}
		sup := newBrowser(t, srv.URL)
		sup.login("support@example.com")
		code, preview, _ := sup.post("/bulk", url.Values{"csrf": {sup.csrf}, "reason_filter": {"version_mismatch"}, "action": {"fail"},
			"reason": {"wrong version rendered"}})
		if code != http.StatusOK || !strings.Contains(preview, "3 open cases match") {
			t.Fatalf("preview: %d, want the 3 cases listed", code)
		}
		if n := applyCount(t, preview); n != 2 {
			t.Errorf("the preview offers to apply to %d cases, want 2: %s is held by another reviewer", n, held)
		}
		if !strings.Contains(preview, "is held by reviewer@example.com") {
			t.Errorf("the preview does not say who holds %s", held)
		}
		confirm := bulkConfirmForm(t, preview)
		for _, c := range confirm["case"] {
			if strings.HasPrefix(c, held+":") {
				t.Errorf("the confirm form carries %s, which another reviewer holds", held)
			}
		}
		code, body, _ := sup.post("/bulk", confirm)
		if code != http.StatusOK || !strings.Contains(body, "Applied to 2 cases; 0 skipped.") {
			t.Errorf("apply: %d, want the 2 cases offered applied", code)
		}
		for id, want := range map[string]string{free: store.CaseResolved, mine: store.CaseResolved, held: store.CaseOpen} {
			if c, _ := st.GetCase(ctx, id, nil); c.Status != want {
				t.Errorf("case %s: %s, want %s", id, c.Status, want)
			}
		}
	})
}
