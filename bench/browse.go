package bench

// browse_*, search_* and operation_* of `limbo bench`: the operations
// browser (/operations), its search (/operations?q=) and the operation page
// (/operations/:id), whole HTML, as the signed-in reviewer of the queue
// part over the same bulk-loaded ledger (store.BulkLoad: operation x is
// op_bench%010d, key key-x, source ref src-x, resource ref file-x.pdf once
// confirmed, tenant bench-(x%10), created x seconds before the load).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// browseFigures holds the sorted latencies of the browser, the search and
// the operation page, and of each kind of request within them.
type browseFigures struct {
	browse, search, operation []time.Duration
	// audit: the audit page and its export (benchAudit).
	audit []time.Duration
	kinds map[string][]time.Duration
}

var benchOpsNext = regexp.MustCompile(`href="(/operations\?[^"]*after=[^"]+)" rel="next"`)

// benchOpID is the id BulkLoad gives operation x.
func benchOpID(x int) string { return fmt.Sprintf("op_bench%010d", x) }

// benchOpLink is how the browser links operation x.
func benchOpLink(x int) string { return `href="/operations/` + benchOpID(x) + `"` }

// benchRequest is one timed page: what to fetch and what it must show.
type benchRequest struct {
	kind, path string
	// want is text the page must contain (a link to the operation the
	// request is about, say).
	want string
	// redirect: the answer is a 303 to this operation page, fetched too;
	// the time is both, what the person who pasted an id waits for.
	redirect bool
}

// benchOperations times n browser pages, n searches and n operation pages
// over the bulk load of ops operations, the first open of them in review.
// Each search is a new term drawn from the loaded data, so no answer is
// served twice from a cache; the first request of each kind warms up.
func benchOperations(ctx context.Context, br *benchBrowser, ops, open, n int) (*browseFigures, error) {
	// The terms below are drawn from x < 100 and from settled operations.
	if ops < 100 || open >= ops {
		return nil, errors.New("bench: the operations browser needs --queue-ops of at least 100, not all open")
	}
	f := &browseFigures{kinds: map[string][]time.Duration{}}
	rnd := rand.New(rand.NewPCG(17, 1))
	// x drawn among the loaded operations, settled (confirmed) or open.
	settled := func() int { return open + rnd.IntN(ops-open) }
	anyOp := func() int { return rnd.IntN(ops) }

	// A deep keyset page: follow "Next page" twenty pages in.
	deep := "/operations"
	for range 20 {
		body, _, err := br.get(ctx, deep)
		if err != nil {
			return nil, err
		}
		m := benchOpsNext.FindStringSubmatch(body)
		if m == nil { // a small ledger: its last page
			break
		}
		deep = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	browse := []benchRequest{
		{kind: "browse:first", path: "/operations", want: `href="/operations/`},
		{kind: "browse:state", path: "/operations?state=confirmed", want: `href="/operations/`},
		// Tenant bench-3's newest bulk operation is x = 3.
		{kind: "browse:tenant", path: "/operations?tenant=bench-3", want: benchOpLink(3)},
		{kind: "browse:deep", path: deep, want: `href="/operations/`},
	}
	searches := []func() benchRequest{
		func() benchRequest { // a key by its prefix: key-x is the newest key starting so
			x := anyOp()
			return benchRequest{kind: "search:key-prefix", path: "/operations?q=" + url.QueryEscape(fmt.Sprint("key-", x)), want: benchOpLink(x)}
		},
		func() benchRequest { // part of a source ref: src-x, newest of those containing it
			x := anyOp()
			return benchRequest{kind: "search:source-ref", path: "/operations?q=" + url.QueryEscape(fmt.Sprint("src-", x)), want: benchOpLink(x)}
		},
		func() benchRequest { // a resource ref typed in capitals
			x := settled()
			return benchRequest{kind: "search:resource-ref", path: "/operations?q=" + url.QueryEscape(fmt.Sprint("FILE-", x, ".PDF")), want: benchOpLink(x)}
		},
		func() benchRequest { // a fragment in a ninth of all source refs: src-d…
			d := 1 + rnd.IntN(9)
			return benchRequest{kind: "search:broad", path: "/operations?q=" + url.QueryEscape(fmt.Sprint("src-", d)), want: benchOpLink(d)}
		},
		func() benchRequest { // two digits: shorter than a trigram, so ids and key prefixes only (none here), and the page says so
			return benchRequest{kind: "search:short", path: "/operations?q=" + fmt.Sprint(10+rnd.IntN(90)), want: "type at least 3 characters"}
		},
		func() benchRequest { // nothing matches
			return benchRequest{kind: "search:none", path: "/operations?q=" + url.QueryEscape(fmt.Sprintf("no-such-ref-%d", rnd.IntN(1e9))),
				want: `<p class="empty">`}
		},
		func() benchRequest { // an exact id: the answer is the operation itself
			x := anyOp()
			return benchRequest{kind: "search:id", path: "/operations?q=" + benchOpID(x), want: "<code>" + benchOpID(x) + "</code>", redirect: true}
		},
	}
	operation := []func() benchRequest{
		func() benchRequest {
			x := settled()
			return benchRequest{kind: "operation:settled", path: "/operations/" + benchOpID(x), want: "<code>" + benchOpID(x) + "</code>"}
		},
		func() benchRequest {
			if open == 0 {
				x := settled()
				return benchRequest{kind: "operation:settled", path: "/operations/" + benchOpID(x), want: "<code>" + benchOpID(x) + "</code>"}
			}
			x := rnd.IntN(open)
			return benchRequest{kind: "operation:open", path: "/operations/" + benchOpID(x), want: "<code>" + benchOpID(x) + "</code>"}
		},
	}
	for _, part := range []struct {
		into  *[]time.Duration
		next  func(i int) benchRequest
		kinds int
	}{
		{&f.browse, func(i int) benchRequest { return browse[i%len(browse)] }, len(browse)},
		{&f.search, func(i int) benchRequest { return searches[i%len(searches)]() }, len(searches)},
		{&f.operation, func(i int) benchRequest { return operation[i%len(operation)]() }, len(operation)},
	} {
		for i := range n + part.kinds {
			r := part.next(i)
			took, err := br.timed(ctx, r)
			if err != nil {
				return nil, err
			}
			if i >= part.kinds { // the first of each kind warms up
				*part.into = append(*part.into, took)
				f.kinds[r.kind] = append(f.kinds[r.kind], took)
			}
		}
		slices.Sort(*part.into)
	}
	for _, d := range f.kinds {
		slices.Sort(d)
	}
	return f, nil
}

// timed fetches r's page (and the page it redirects to, when it should)
// and checks that it shows what it should.
func (b *benchBrowser) timed(ctx context.Context, r benchRequest) (time.Duration, error) {
	var body string
	var took time.Duration
	var err error
	if r.redirect {
		body, took, err = b.getRedirect(ctx, r.path)
	} else {
		body, took, err = b.get(ctx, r.path)
	}
	if err != nil {
		return 0, err
	}
	if !strings.Contains(body, r.want) {
		return 0, fmt.Errorf("bench: %s (%s) does not show %s", r.path, r.kind, r.want)
	}
	return took, nil
}

// getRedirect fetches path, which must answer 303, and the page it points
// to, timing both together.
func (b *benchBrowser) getRedirect(ctx context.Context, path string) (string, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		return "", 0, err
	}
	t0 := time.Now()
	resp, err := b.c.Do(req)
	if err != nil {
		return "", 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return "", 0, fmt.Errorf("bench: GET %s: %d, want 303", path, resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/") {
		return "", 0, fmt.Errorf("bench: GET %s redirects to %q", path, loc)
	}
	body, _, err := b.get(ctx, loc)
	if err != nil {
		return "", 0, err
	}
	return body, time.Since(t0), nil
}
