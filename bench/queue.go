package bench

// queue_p50_ms, queue_p99_ms and case_p99_ms of `limbo bench`: the
// console's pages, whole HTML with their counts, as a signed-in reviewer
// over a bulk-loaded ledger (the pages handlers/queue_bench_test.go times).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
)

// queueFigures holds the queue run's sorted latencies.
type queueFigures struct {
	load  time.Duration
	queue []time.Duration
	cases []time.Duration
	// ops: the operations browser, search and operation pages.
	ops *browseFigures
}

var (
	benchCSRF     = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	benchCaseLink = regexp.MustCompile(`href="/cases/([^"/]+)"`)
	benchNextLink = regexp.MustCompile(`href="(/\?after=[^"]+)"`)
)

// benchQueue bulk-loads ops operations with open cases among them, signs
// in as a reviewer, and times n queue pages (cycling through the first
// page, a reason filter, a tenant and destination filter and a deep keyset
// page) and n case pages of open cases seen on those pages; then the
// operations browser, its search and operation pages (benchOperations).
// reuse: the ledger is already loaded (an earlier run's), and is only
// checked for its size. noStats: SQLite's pages are timed without planner
// statistics, as serve's database is.
func benchQueue(ctx context.Context, st *store.Store, base string, ops, open, n int, reuse, noStats bool) (*queueFigures, error) {
	f := &queueFigures{}
	t0 := time.Now()
	if reuse {
		var held int
		if err := st.DB().GetContext(ctx, &held, `SELECT COUNT(*) FROM operations`); err != nil {
			return nil, err
		}
		if held != ops {
			return nil, fmt.Errorf("bench: --reuse-ledger: the database holds %d operations, not --queue-ops %d", held, ops)
		}
	} else if err := st.BulkLoad(ctx, ops, open); err != nil {
		return nil, err
	}
	f.load = time.Since(t0)
	if noStats {
		if err := st.ForgetPlannerStatistics(ctx); err != nil {
			return nil, err
		}
	}
	pw := store.GeneratePassword()
	// A reviewer of this run's own: a reused ledger holds earlier runs'.
	email := "bench-reviewer-" + strings.ToLower(pw[:8]) + "@example.com"
	if _, err := st.AddUser(ctx, review.Operator("cli:bench"), store.NewUser{Email: email, Password: pw, Role: review.RoleReviewer,
		Scope: review.Scope{All: true}}); err != nil {
		return nil, err
	}
	br, err := benchLogin(ctx, base, email, pw)
	if err != nil {
		return nil, err
	}
	defer br.c.CloseIdleConnections()

	// A deep keyset page: follow "Next page" twenty pages in.
	deep := "/"
	for range 20 {
		body, _, err := br.get(ctx, deep)
		if err != nil {
			return nil, err
		}
		m := benchNextLink.FindStringSubmatch(body)
		if m == nil {
			break
		}
		deep = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	pages := []string{"/", "/?reason=" + string(review.ReasonMultipleCands), "/?tenant=bench-3&destination=dest-3", deep}
	seen := map[string]bool{}
	var caseIDs []string
	for i := range n + len(pages) {
		body, took, err := br.get(ctx, pages[i%len(pages)])
		if err != nil {
			return nil, err
		}
		if !strings.Contains(body, "open</strong>") {
			return nil, fmt.Errorf("bench: queue page %s has no open count", pages[i%len(pages)])
		}
		if i >= len(pages) { // the first pass warms up
			f.queue = append(f.queue, took)
		}
		for _, m := range benchCaseLink.FindAllStringSubmatch(body, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				caseIDs = append(caseIDs, m[1])
			}
		}
	}
	if len(caseIDs) == 0 {
		return nil, errors.New("bench: the queue pages list no cases")
	}
	for i := range n {
		_, took, err := br.get(ctx, "/cases/"+caseIDs[i%len(caseIDs)])
		if err != nil {
			return nil, err
		}
		f.cases = append(f.cases, took)
	}
	slices.Sort(f.queue)
	slices.Sort(f.cases)
	if f.ops, err = benchOperations(ctx, br, ops, open, n); err != nil {
		return nil, err
	}
	if err := benchAudit(ctx, st, base, f.ops, ops, n); err != nil {
		return nil, err
	}
	return f, nil
}

// benchBrowser keeps the session cookie and does not follow redirects.
type benchBrowser struct {
	c    *http.Client
	base string
}

// benchLogin signs in through the login form, CSRF token included.
func benchLogin(ctx context.Context, base, email, password string) (*benchBrowser, error) {
	jar, _ := cookiejar.New(nil)
	br := &benchBrowser{base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	resp, err := br.c.Get(base + "/login")
	if err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := benchCSRF.FindSubmatch(body)
	if m == nil {
		return nil, errors.New("bench: the login form has no CSRF token")
	}
	form := url.Values{"email": {email}, "password": {password}, "csrf": {string(m[1])}, "next": {"/"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = br.c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("bench: sign-in as %s: %d", email, resp.StatusCode)
	}
	return br, nil
}

// get fetches a console page, whole, and times it.
func (b *benchBrowser) get(ctx context.Context, path string) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		return "", 0, err
	}
	t0 := time.Now()
	resp, err := b.c.Do(req)
	if err != nil {
		return "", 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(t0)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("bench: GET %s: %d", path, resp.StatusCode)
	}
	return string(body), took, nil
}
