package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/reconcile"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// The reconciler's reading of the destination, against scripted fake
// destinations on loopback (issue 12, holes 10–15): every answer below is
// one a real destination can give, and each must be read strictly.

// scripted is a fake destination whose every answer the test writes: the
// script gets the request and the operation id it names (the search's
// query, or "" for a lookup) and returns a status and a body. It records
// the requests it got.
type scripted struct {
	url string

	mu   sync.Mutex
	reqs []*http.Request
}

func newScripted(t *testing.T, script func(r *http.Request, opID string) (int, string)) *scripted {
	t.Helper()
	s := &scripted{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs = append(s.reqs, r.Clone(r.Context()))
		s.mu.Unlock()
		status, body := script(r, r.URL.Query().Get("operation_id"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *scripted) requests() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// scriptedConfig is the YAML of destination name probing base: a status
// lookup (at status, by default /lookup/ the resource or job ref), a
// metadata search (searchExtra adds lines to it) and a job probe; auth
// adds auth_header/auth_env lines to every probe. Read through
// review.ParseConfig, as a file would be.
func scriptedConfig(t *testing.T, name, base, status, searchExtra, auth string) review.Destination {
	t.Helper()
	if status == "" {
		status = "/lookup/{{if .ResourceRef}}{{.ResourceRef}}{{else}}{{.JobRef}}{{end}}?operation_id={{.ID}}"
	}
	indent := func(s string) string {
		if s == "" {
			return ""
		}
		return "        " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n        ") + "\n"
	}
	yaml := fmt.Sprintf(`destinations:
  %s:
    lease: 1m
    search_lag: %s
    allow_internal: [127.0.0.1]
    probes:
      status:
        url: "%s%s"
        timeout: 2s
%s      search:
        url: "%s/search?operation_id={{.ID}}"
        candidates: $.results
        timeout: 2s
%s%s      job:
        url: "%s/jobs/{{.JobRef}}"
        timeout: 2s
%s`, name, searchLag, base, status, indent(auth), base, indent(searchExtra), indent(auth), base, indent(auth))
	cfg, err := review.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatalf("config:\n%s\n%v", yaml, err)
	}
	return cfg.Destination(name)
}

// candidate is a search hit as JSON.
func candidate(ref, opID, version string) string {
	return fmt.Sprintf(`{"ref":%q,"kind":"folder","version":%q,"operation_id":%q}`, ref, version, opID)
}

// scriptCase is one destination's script and what one round of
// reconciliation must make of it.
type scriptCase struct {
	name   string
	status string // the status probe's path, when not the default
	search string // extra lines of the search probe's configuration
	auth   string // extra lines of every probe's configuration
	script func(r *http.Request, opID string) (int, string)
	// timeout is attempt 1's outcome, when not a plain timeout after send.
	timeout *review.Outcome
	// setup runs on the ambiguous operation before the round.
	setup func(t *testing.T, b *testBundle, op *review.Operation)
	check func(t *testing.T, b *testBundle, s *scripted, got *review.Operation)
}

// runCases gives every case its own scripted destination and ambiguous
// operation, runs one round past the search lag on both engines, and
// checks each.
func runCases(t *testing.T, cases []scriptCase) {
	t.Helper()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		servers := make([]*scripted, len(cases))
		extra := map[string]review.Destination{}
		for i, c := range cases {
			servers[i] = newScripted(t, c.script)
			extra[fmt.Sprintf("scripted-%d", i)] = scriptedConfig(t, fmt.Sprintf("scripted-%d", i), servers[i].url, c.status, c.search, c.auth)
		}
		b := setup(t, e, sandbox.Options{}, extra)
		ops := make([]*review.Operation, len(cases))
		for i, c := range cases {
			ops[i] = b.ambiguousAfter(t, fmt.Sprintf("folder-%d", i), fmt.Sprintf("scripted-%d", i), c.timeout)
			if c.setup != nil {
				c.setup(t, b, ops[i])
			}
		}
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, len(cases))
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				c.check(t, b, servers[i], b.get(t, ops[i]))
			})
		}
		sealed(t, b.st)
	})
}

// lastEvidence is the operation's newest evidence row of source src.
func lastEvidence(t *testing.T, op *review.Operation, src review.EvidenceSource) review.Evidence {
	t.Helper()
	for i := len(op.Evidence) - 1; i >= 0; i-- {
		if op.Evidence[i].Source == src {
			return op.Evidence[i]
		}
	}
	t.Fatalf("no %s evidence in %+v", src, op.Evidence)
	return review.Evidence{}
}

// stillAmbiguous: the round proved nothing; its search is recorded as
// inconclusive, with a note containing note.
func stillAmbiguous(note string) func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
	return func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		wantState(t, got, review.Ambiguous)
		ev := lastEvidence(t, got, review.SourceMetadataSearch)
		if ev.Verdict != review.VerdictInconclusive || !strings.Contains(ev.Note, note) {
			t.Errorf("search evidence %+v, want inconclusive, noting %q", ev, note)
		}
	}
}

// escalated: the operation went to a person with reason among the case's.
func escalated(reason review.Reason) func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
	return func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		wantState(t, got, review.NeedsReview)
		cs, err := b.st.CasesForOperation(b.ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || !slices.Contains(cs[0].Reasons, reason) {
			t.Errorf("cases %+v, want one naming %s", cs, reason)
		}
	}
}

// confirmedAs: confirmed on ref at version, on evidence that confirms.
func confirmedAs(ref, version string) func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
	return func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		wantState(t, got, review.Confirmed)
		if got.Resource == nil || got.Resource.Ref != ref || got.Resource.Version != version {
			t.Errorf("resource %+v, want %s at version %q", got.Resource, ref, version)
		}
		// I7: the round's own evidence confirms, not a row saying it was
		// inconclusive.
		if ev := lastEvidence(t, got, review.SourceMetadataSearch); ev.Verdict != review.VerdictConfirms || !ev.Authoritative {
			t.Errorf("search evidence %+v, want an authoritative confirmation", ev)
		}
	}
}

// searchAnswers scripts a destination whose search answers body (%[1]s is
// the operation id) and whose lookups find nothing.
func searchAnswers(body func(opID string) string) func(r *http.Request, opID string) (int, string) {
	return func(r *http.Request, opID string) (int, string) {
		if r.URL.Path != "/search" {
			return http.StatusNotFound, `{"error":"not_found"}`
		}
		return http.StatusOK, body(opID)
	}
}

// TestExactlyOneCandidate (hole 10): exactly one candidate naming the
// operation and its version confirms — a candidate without an operation
// id beside it makes the answer inconclusive, and the same ref listed
// twice is one candidate, confirmed on evidence that says so.
func TestExactlyOneCandidate(t *testing.T) {
	t.Parallel()
	runCases(t, []scriptCase{
		{name: "a match and a candidate naming no operation",
			script: searchAnswers(func(id string) string {
				return `{"results":[` + candidate("fld-1", id, "v1") + `,{"ref":"fld-2","kind":"folder","version":"v1"}]}`
			}),
			check: stillAmbiguous("names no operation")},
		{name: "the same ref twice",
			script: searchAnswers(func(id string) string {
				return `{"results":[` + candidate("fld-1", id, "v1") + `,` + candidate("fld-1", id, "v1") + `]}`
			}),
			check: confirmedAs("fld-1", "v1")},
		{name: "the same ref twice, differently",
			script: searchAnswers(func(id string) string {
				return `{"results":[` + candidate("fld-1", id, "v1") + `,` + candidate("fld-1", id+"-other", "v1") + `]}`
			}),
			check: stillAmbiguous("fld-1 twice")},
		{name: "a match beside another operation's resource",
			script: searchAnswers(func(id string) string {
				return `{"results":[` + candidate("fld-1", id, "v1") + `,` + candidate("fld-9", "op-someone-else", "v1") + `]}`
			}),
			check: confirmedAs("fld-1", "v1")},
	})
}

// TestAnotherLogicalVersion (hole 11): a candidate's version is its
// "version", or its "logical_version" when "version" is empty; another
// version is never a match. Neither at all: the destination does not
// version, and the operation id decides.
func TestAnotherLogicalVersion(t *testing.T) {
	t.Parallel()
	runCases(t, []scriptCase{
		{name: "empty version, logical_version v2",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1","version":"","logical_version":"v2","operation_id":"` + id + `"}]}`
			}),
			check: escalated(review.ReasonVersionMismatch)},
		{name: "empty version, logical_version v1",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1","version":"","logical_version":"v1","operation_id":"` + id + `"}]}`
			}),
			check: confirmedAs("fld-1", "v1")},
		{name: "logical_version only, v2",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1","logical_version":"v2","operation_id":"` + id + `"}]}`
			}),
			check: escalated(review.ReasonVersionMismatch)},
		{name: "no version at all",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1","operation_id":"` + id + `"}]}`
			}),
			check: confirmedAs("fld-1", "")},
	})
}

// pages scripts a paged search: page n (the first has no cursor, page n
// is asked for with cursor "p<n>") answers body(n, opID).
func pages(body func(n int, opID string) string) func(r *http.Request, opID string) (int, string) {
	return func(r *http.Request, opID string) (int, string) {
		if r.URL.Path != "/search" {
			return http.StatusNotFound, `{"error":"not_found"}`
		}
		n := 1
		if c := r.URL.Query().Get("cursor"); c != "" {
			if _, err := fmt.Sscanf(c, "p%d", &n); err != nil {
				return http.StatusBadRequest, `{"error":"bad cursor"}`
			}
		}
		if n == 0 {
			return http.StatusBadRequest, `{"error":"bad cursor"}`
		}
		return http.StatusOK, body(n, opID)
	}
}

const paged = "next: $.next\ncursor_param: cursor"

// TestEveryPageIsRead (hole 12): a search is read to its last page, up to
// 20; an answer with more pages than that, or one that
// repeats a cursor or fails on a later page, proves nothing.
func TestEveryPageIsRead(t *testing.T) {
	t.Parallel()
	pagesAsked := func(want int) func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		return func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
			t.Helper()
			if n := len(s.requests()); n != want {
				t.Errorf("%d requests, want %d", n, want)
			}
		}
	}
	both := func(fs ...func(t *testing.T, b *testBundle, s *scripted, got *review.Operation)) func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		return func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
			for _, f := range fs {
				f(t, b, s, got)
			}
		}
	}
	runCases(t, []scriptCase{
		{name: "the match on page 3", search: paged,
			script: pages(func(n int, id string) string {
				switch n {
				case 1:
					return `{"results":[],"next":"p2"}`
				case 2:
					return `{"results":[],"next":"p3"}`
				}
				return `{"results":[` + candidate("fld-1", id, "v1") + `],"next":null}`
			}),
			check: both(confirmedAs("fld-1", "v1"), pagesAsked(3))},
		{name: "a second match on page 2", search: paged,
			script: pages(func(n int, id string) string {
				if n == 1 {
					return `{"results":[` + candidate("fld-1", id, "v1") + `],"next":"p2"}`
				}
				return `{"results":[` + candidate("fld-2", id, "v1") + `]}`
			}),
			check: escalated(review.ReasonMultipleCands)},
		{name: "empty pages, then nothing more", search: paged,
			script: pages(func(n int, id string) string {
				if n == 1 {
					return `{"results":[],"next":"p2"}`
				}
				return `{"results":[],"next":""}`
			}),
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				wantState(t, got, review.RetryWait)
				pagesAsked(2)(t, b, s, got)
			}},
		{name: "more pages than the bound", search: paged,
			script: pages(func(n int, id string) string { return fmt.Sprintf(`{"results":[],"next":"p%d"}`, n+1) }),
			check:  both(stillAmbiguous("pages"), pagesAsked(review.MaxSearchPages))},
		{name: "a cursor repeated", search: paged,
			script: pages(func(n int, id string) string { return `{"results":[],"next":"p2"}` }),
			check:  both(stillAmbiguous("repeated"), pagesAsked(2))},
		{name: "a later page fails", search: paged,
			script: func(r *http.Request, opID string) (int, string) {
				if r.URL.Query().Get("cursor") != "" {
					return http.StatusInternalServerError, `{"error":"internal"}`
				}
				return http.StatusOK, `{"results":[],"next":"p2"}`
			},
			check: stillAmbiguous("failed")},
	})
}

// TestAnswersReadStrictly (hole 13): a probe's answer is one strict JSON
// value — trailing bytes, a duplicate member, a null where the list
// belongs make it unreadable, never "nothing found".
func TestAnswersReadStrictly(t *testing.T) {
	t.Parallel()
	runCases(t, []scriptCase{
		{name: "trailing bytes",
			script: searchAnswers(func(string) string { return `{"results":[]} <html>500 Internal Server Error</html>` }),
			check:  stillAmbiguous("trailing data")},
		{name: "a second value",
			script: searchAnswers(func(string) string { return `{"results":[]}{"results":[]}` }),
			check:  stillAmbiguous("trailing data")},
		{name: "duplicate members, the empty one last",
			script: searchAnswers(func(id string) string { return `{"results":[` + candidate("fld-1", id, "v1") + `],"results":[]}` }),
			check:  stillAmbiguous("duplicate member")},
		{name: "duplicate members in a candidate",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1","operation_id":"op-other","operation_id":"` + id + `","version":"v1"}]}`
			}),
			check: stillAmbiguous("duplicate member")},
		{name: "null results",
			script: searchAnswers(func(string) string { return `{"results":null}` }),
			check:  stillAmbiguous("null")},
		{name: "no results member",
			script: searchAnswers(func(string) string { return `{}` }),
			check:  stillAmbiguous("failed")},
	})
}

// searchStatus scripts a destination whose search answers code and body,
// and whose lookups find nothing.
func searchStatus(code int, body func(opID string) string) func(r *http.Request, opID string) (int, string) {
	return func(r *http.Request, opID string) (int, string) {
		if r.URL.Path != "/search" {
			return http.StatusNotFound, `{"error":"not_found"}`
		}
		return code, body(opID)
	}
}

// TestOnlyA200IsRead: only a 200 answer is read. Another 2xx is no answer
// about what was asked — 202 accepted the request without doing it, 206 is
// part of the answer, 203 a proxy's rewrite of it, 204 none — and an
// empty list in it is no proof of absence.
func TestOnlyA200IsRead(t *testing.T) {
	t.Parallel()
	empty := func(string) string { return `{"results":[]}` }
	runCases(t, []scriptCase{
		{name: "202, empty results", script: searchStatus(http.StatusAccepted, empty), check: stillAmbiguous("HTTP 202")},
		{name: "206, empty results", script: searchStatus(http.StatusPartialContent, empty), check: stillAmbiguous("HTTP 206")},
		{name: "203, empty results", script: searchStatus(http.StatusNonAuthoritativeInfo, empty), check: stillAmbiguous("HTTP 203")},
		{name: "202, a match", script: searchStatus(http.StatusAccepted, func(id string) string {
			return `{"results":[` + candidate("fld-1", id, "v1") + `]}`
		}), check: stillAmbiguous("HTTP 202")},
		{name: "200, empty results", script: searchStatus(http.StatusOK, empty),
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				wantState(t, got, review.RetryWait)
			}},
	})
}

// TestCandidateReadWhole: a candidate's members are read as the
// destination wrote them or not at all. A member that is not text (a
// string or a number; null is absent), or that breaks the rule for
// identifiers (review.CheckText: over 255 characters, a control
// character), or two names for one member ("ref" and "id", "version" and
// "logical_version") that disagree, make the answer unreadable: cut to
// 255 characters two refs would be one, and a version of the wrong type
// would read as "the destination does not version".
func TestCandidateReadWhole(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 260)
	member := func(members string) func(r *http.Request, opID string) (int, string) {
		return searchAnswers(func(id string) string {
			return `{"results":[{"ref":"fld-1","kind":"folder","operation_id":"` + id + `",` + members + `}]}`
		})
	}
	runCases(t, []scriptCase{
		{name: "version an object", script: member(`"version":{"n":2}`), check: stillAmbiguous(`"version" is an object, not text`)},
		{name: "version true", script: member(`"version":true`), check: stillAmbiguous(`"version" is a boolean, not text`)},
		{name: "logical_version a list", script: member(`"logical_version":["v1"]`), check: stillAmbiguous(`"logical_version" is a list, not text`)},
		{name: "status an object", script: member(`"version":"v1","status":{}`), check: stillAmbiguous(`"status" is an object`)},
		{name: "version null", script: member(`"version":null`), check: confirmedAs("fld-1", "")},
		{name: "version v1, logical_version v2", script: member(`"version":"v1","logical_version":"v2"`),
			check: stillAmbiguous(`"version" "v1" and "logical_version" "v2" disagree`)},
		{name: "version and logical_version both v1", script: member(`"version":"v1","logical_version":"v1"`), check: confirmedAs("fld-1", "v1")},
		{name: "ref and id disagree", script: member(`"id":"fld-2","version":"v1"`), check: stillAmbiguous(`"ref" "fld-1" and "id" "fld-2" disagree`)},
		{name: "ref and id agree", script: member(`"id":"fld-1","version":"v1"`), check: confirmedAs("fld-1", "v1")},
		{name: "two long refs sharing 255 characters",
			script: searchAnswers(func(id string) string {
				return `{"results":[` + candidate(long+"A", id, "v1") + `,` + candidate(long+"B", id, "v1") + `]}`
			}),
			check: stillAmbiguous("at most 255 characters, got 261")},
		{name: "one long ref",
			script: searchAnswers(func(id string) string { return `{"results":[` + candidate(long+"A", id, "v1") + `]}` }),
			check:  stillAmbiguous("at most 255 characters, got 261")},
		{name: "a long version",
			script: searchAnswers(func(id string) string { return `{"results":[` + candidate("fld-1", id, long) + `]}` }),
			check:  stillAmbiguous("at most 255 characters, got 260")},
		{name: "a ref with a NUL",
			script: searchAnswers(func(id string) string {
				return `{"results":[{"ref":"fld-1\u0000","kind":"folder","version":"v1","operation_id":"` + id + `"}]}`
			}),
			check: stillAmbiguous("NUL")},
	})
}

// unsetCredential names an environment variable no test sets.
const unsetCredential = "LIMBO_TEST_UNSET_PROBE_TOKEN_7F3A"

// TestMissingCredential (hole 14): a probe whose auth_env is not set is
// not sent — an unauthenticated "nothing found" is no proof of absence —
// and the round is inconclusive, naming the variable.
func TestMissingCredential(t *testing.T) {
	t.Parallel()
	runCases(t, []scriptCase{
		{name: "auth_env unset",
			auth: "auth_header: Authorization\nauth_env: " + unsetCredential,
			script: func(r *http.Request, opID string) (int, string) {
				return http.StatusOK, `{"results":[]}`
			},
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				stillAmbiguous("credential "+unsetCredential+" is not set")(t, b, s, got)
				if reqs := s.requests(); len(reqs) != 0 {
					t.Errorf("%d requests sent (Authorization %q), want none", len(reqs), reqs[0].Header.Get("Authorization"))
				}
			}},
	})
}

// jobLookup scripts a destination whose lookup of job J1 answers status
// and body, and whose search finds nothing.
func jobLookup(status int, body string) func(r *http.Request, opID string) (int, string) {
	return func(r *http.Request, opID string) (int, string) {
		switch r.URL.Path {
		case "/lookup/J1":
			return status, body
		case "/search":
			return http.StatusOK, `{"results":[]}`
		}
		return http.StatusNotFound, `{"error":"not_found"}`
	}
}

// TestAJobThatFailedIsNoEffect: attempt 1 was accepted as job J1 and the
// connection dropped; J1 then failed, as its report said. A search that
// lists J1 (a destination listing failed jobs) and nothing else shows that
// no effect is there, as an empty one does: the operation is retried, and
// J1 is not looked up — the ledger knows its end, and a destination that
// has purged it would read as a contradiction. Before, every round was
// inconclusive, backing off, until a person was asked after eight.
func TestAJobThatFailedIsNoEffect(t *testing.T) {
	t.Parallel()
	withJob := &review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend,
		Job: &review.JobRef{Ref: "J1", Status: string(review.JobQueued)}}
	failed := func(t *testing.T, b *testBundle, op *review.Operation) {
		got, err := b.st.PutJob(b.ctx, tenant, op.ID, review.Job{Ref: "J1", Status: review.JobFailed}, "integrator")
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, got, review.Ambiguous)
	}
	listsJ1 := func(r *http.Request, opID string) (int, string) {
		if r.URL.Path == "/search" {
			return http.StatusOK, fmt.Sprintf(`{"results":[{"ref":"J1","kind":"job","version":"v1","operation_id":%q}]}`, opID)
		}
		return http.StatusNotFound, `{"error":"not_found"}`
	}
	retried := func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		wantState(t, got, review.RetryWait)
		ev := lastEvidence(t, got, review.SourceMetadataSearch)
		want := review.WhySearchNothing
		if len(ev.Candidates) > 0 {
			want = fmt.Sprintf(review.WhySearchOnlyEnded, "J1")
		}
		if ev.Verdict != review.VerdictRefutes || ev.Note != want {
			t.Errorf("search evidence %+v, want refutes, noting %q", ev, want)
		}
		for _, r := range s.requests() {
			if r.URL.Path != "/search" {
				t.Errorf("asked %s: only the search was to be sent", r.URL)
			}
		}
	}
	runCases(t, []scriptCase{
		{name: "the search lists the failed job", timeout: withJob, setup: failed, script: listsJ1, check: retried},
		{name: "the search lists nothing", timeout: withJob, setup: failed, script: jobLookup(http.StatusNotFound, ""), check: retried},
	})
}

// TestKnownJobNotFound (hole 15): the ledger holds job J1 for the
// ambiguous operation. The destination no longer finding it contradicts
// the ledger (state_conflict, a person decides); a lookup that fails
// proves nothing — in neither case is the empty search proof of absence.
func TestKnownJobNotFound(t *testing.T) {
	t.Parallel()
	// Attempt 1 was accepted as job J1, and the connection dropped after
	// the destination said so: the job is the operation's, its effect
	// unknown. (A job is the operation's only when an outcome names it.)
	withJob := &review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend,
		Job: &review.JobRef{Ref: "J1", Status: string(review.JobQueued)}}
	lookupInconclusive := func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
		t.Helper()
		wantState(t, got, review.Ambiguous)
		if ev := lastEvidence(t, got, review.SourceMetadataSearch); ev.Verdict == review.VerdictRefutes {
			t.Errorf("search evidence %+v: an empty search beside an unanswered lookup of J1 refutes nothing", ev)
		}
	}
	runCases(t, []scriptCase{
		{name: "404", timeout: withJob, script: jobLookup(http.StatusNotFound, `{"error":"not_found"}`), check: escalated(review.ReasonStateConflict)},
		{name: "410", timeout: withJob, script: jobLookup(http.StatusGone, `{"error":"gone"}`), check: escalated(review.ReasonStateConflict)},
		{name: "another ref", timeout: withJob, script: jobLookup(http.StatusOK, `{"ref":"J2","kind":"job","status":"queued"}`),
			check: escalated(review.ReasonStateConflict)},
		{name: "404 to the job probe, the status probe being for resources", timeout: withJob, status: "/resources/{{.ResourceRef}}",
			script: func(r *http.Request, opID string) (int, string) {
				if r.URL.Path == "/jobs/J1" {
					return http.StatusNotFound, `{"error":"not_found"}`
				}
				return jobLookup(0, "")(r, opID)
			},
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				escalated(review.ReasonStateConflict)(t, b, s, got)
				for _, r := range s.requests() {
					if strings.HasPrefix(r.URL.Path, "/resources") {
						t.Errorf("asked %s: a status probe for resources cannot look a job up", r.URL)
					}
				}
			}},
		{name: "500", timeout: withJob, script: jobLookup(http.StatusInternalServerError, `{"error":"internal"}`), check: lookupInconclusive},
		{name: "202, another ref", timeout: withJob, script: jobLookup(http.StatusAccepted, `{"ref":"J2","kind":"job","status":"queued"}`),
			check: lookupInconclusive},
		{name: "ref J1, id J2", timeout: withJob, script: jobLookup(http.StatusOK, `{"ref":"J1","id":"J2","kind":"job","status":"queued"}`),
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				lookupInconclusive(t, b, s, got)
				if ev := lastEvidence(t, got, review.SourceStatusLookup); ev.Verdict != review.VerdictInconclusive || !strings.Contains(ev.Note, "disagree") {
					t.Errorf("lookup evidence %+v, want unreadable: its ref and id disagree", ev)
				}
			}},
		{name: "{}", timeout: withJob, script: jobLookup(http.StatusOK, `{}`), check: lookupInconclusive},
		{name: "found", timeout: withJob,
			script: func(r *http.Request, opID string) (int, string) {
				job := `{"ref":"J1","kind":"job","status":"queued","operation_id":"` + opID + `","logical_version":"v1"}`
				if r.URL.Path == "/search" {
					return http.StatusOK, `{"results":[` + job + `]}`
				}
				return http.StatusOK, job
			},
			check: func(t *testing.T, b *testBundle, s *scripted, got *review.Operation) {
				// Found, and the search agrees: the destination holds the
				// job; follow it.
				wantState(t, got, review.Accepted)
			}},
	})
}

// TestJobAnswerNamesTheJob (hole 15): an accepted operation's job poll
// believes only an answer naming its job (and its operation, when the
// answer names one), read strictly; a job the destination no longer finds
// is a state_conflict for a person, not a poll to repeat for ever.
func TestJobAnswerNamesTheJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string // %s: the operation id
		want   review.State
		reason review.Reason
	}{
		{name: "the job succeeded", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":"%s","logical_version":"v1"}`, want: review.Confirmed},
		{name: "the job succeeded, operation not named", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1"}`, want: review.Confirmed},
		{name: "another job", status: 200, body: `{"ref":"J2","status":"succeeded","output_ref":"out-1","operation_id":"%s"}`, want: review.Accepted},
		{name: "another operation", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":"op-someone-else"}`, want: review.Accepted},
		{name: "no job named", status: 200, body: `{"status":"succeeded","output_ref":"out-1"}`, want: review.Accepted},
		{name: "duplicate status", status: 200, body: `{"ref":"J1","status":"failed","status":"succeeded","output_ref":"out-1"}`, want: review.Accepted},
		{name: "{}", status: 200, body: `{}`, want: review.Accepted},
		{name: "500", status: 500, body: `{"error":"internal"}`, want: review.Accepted},
		// Only a 200 is read, and only whole (TestCandidateReadWhole).
		{name: "202", status: 202, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1"}`, want: review.Accepted},
		{name: "206", status: 206, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1"}`, want: review.Accepted},
		{name: "ref J1, id J2", status: 200, body: `{"ref":"J1","id":"J2","status":"succeeded","output_ref":"out-1"}`, want: review.Accepted},
		{name: "output_ref over 255 characters", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"` + strings.Repeat("o", 256) + `"}`, want: review.Accepted},
		{name: "output_ref an object", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":{"ref":"out-1"}}`, want: review.Accepted},
		{name: "input_version true", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1","input_version":true,"logical_version":"v1"}`, want: review.Accepted},
		{name: "status a number", status: 200, body: `{"ref":"J1","status":3,"output_ref":"out-1"}`, want: review.Accepted},
		// Not two names for one thing: the job ran on input_version, for
		// the operation's logical_version.
		{name: "ran on another input version", status: 200, body: `{"ref":"J1","status":"succeeded","output_ref":"out-1","operation_id":"%s","logical_version":"v1","input_version":"v2"}`,
			want: review.NeedsReview, reason: review.ReasonVersionMismatch},
		{name: "404", status: 404, body: `{"error":"not_found"}`, want: review.NeedsReview, reason: review.ReasonStateConflict},
		{name: "410", status: 410, body: `{"error":"gone"}`, want: review.NeedsReview, reason: review.ReasonStateConflict},
	}
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		// The bodies name the operation, known only once it is registered.
		var mu sync.Mutex
		bodies := make([]string, len(tests))
		extra := map[string]review.Destination{}
		for i, tt := range tests {
			s := newScripted(t, func(r *http.Request, _ string) (int, string) {
				if r.URL.Path != "/jobs/J1" {
					return http.StatusNotFound, `{"error":"not_found"}`
				}
				mu.Lock()
				defer mu.Unlock()
				return tt.status, bodies[i]
			})
			extra[fmt.Sprintf("jobs-%d", i)] = scriptedConfig(t, fmt.Sprintf("jobs-%d", i), s.url, "", "", "")
		}
		b := setup(t, e, sandbox.Options{}, extra)
		ops := make([]*review.Operation, len(tests))
		for i, tt := range tests {
			ops[i] = b.accepted(t, fmt.Sprintf("job-%d", i), fmt.Sprintf("jobs-%d", i), "J1")
			mu.Lock()
			bodies[i] = strings.ReplaceAll(tt.body, "%s", ops[i].ID)
			mu.Unlock()
		}
		b.runOnce(t, len(tests))
		for i, tt := range tests {
			got := b.get(t, ops[i])
			if got.State != tt.want {
				t.Errorf("%s: %s (%s), want %s", tt.name, got.State, got.StateReason, tt.want)
				continue
			}
			if tt.reason != "" {
				cs, err := b.st.CasesForOperation(b.ctx, got.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) != 1 || !slices.Contains(cs[0].Reasons, tt.reason) {
					t.Errorf("%s: cases %+v, want one naming %s", tt.name, cs, tt.reason)
				}
			}
		}
		sealed(t, b.st)
	})
}

// accepted registers a job-producing operation at dest whose first attempt
// was answered with job jobRef queued: the operation is accepted.
func (b *testBundle) accepted(t *testing.T, ref, dest, jobRef string) *review.Operation {
	t.Helper()
	return b.acceptedBy(t, ref, dest, jobRef, nil)
}

// acceptedBy is accepted with a deadline (nil: none).
func (b *testBundle) acceptedBy(t *testing.T, ref, dest, jobRef string, deadline *time.Time) *review.Operation {
	t.Helper()
	payload, err := review.Canonicalize([]byte(`{"input":"` + ref + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := b.st.Register(b.ctx, review.Registration{Tenant: tenant, SourceRef: ref, LogicalVersion: "v1",
		Action: "convert_pdf", Destination: dest, Risk: review.RiskCompensableWrite, Payload: payload, Deadline: deadline, Actor: "test"})
	if err != nil {
		t.Fatalf("Register(%s): %v", ref, err)
	}
	g, err := b.st.StartAttempt(b.ctx, store.AttemptRequest{Tenant: tenant, OperationID: op.ID, Actor: "test"})
	if err != nil {
		t.Fatalf("StartAttempt(%s): %v", ref, err)
	}
	res, err := b.st.RecordOutcome(b.ctx, tenant, op.ID, g.N, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend,
		HTTPStatus: http.StatusAccepted, Job: &review.JobRef{Ref: jobRef, Status: string(review.JobQueued)}}, "test")
	if err != nil {
		t.Fatalf("RecordOutcome(%s): %v", ref, err)
	}
	if res.Operation.State != review.Accepted {
		t.Fatalf("%s is %s after a queued job, want accepted", ref, res.Operation.State)
	}
	return res.Operation
}

// TestCredentials: a probe's credential goes in its auth_header; the
// prober lists the probes whose credential is not set (what serve warns
// of and /readyz names), and sends none of that destination's probes —
// the job poll included.
func TestCredentials(t *testing.T) {
	t.Parallel()
	s := newScripted(t, func(r *http.Request, opID string) (int, string) { return http.StatusOK, `{"results":[]}` })
	withToken := scriptedConfig(t, "with", s.url, "", "", "auth_header: Authorization\nauth_env: LIMBO_TEST_PROBE_TOKEN")
	without := scriptedConfig(t, "without", s.url, "", "", "auth_header: X-Api-Key\nauth_env: "+unsetCredential)
	cfg := &review.Config{Destinations: map[string]review.Destination{"with": withToken, "without": without}}
	env := map[string]string{"LIMBO_TEST_PROBE_TOKEN": "Bearer s3cret"}
	p := reconcile.NewProberEnv(cfg, func(k string) string { return env[k] })

	miss := p.MissingCredentials()
	if len(miss) != 3 || miss[0].Destination != "without" || miss[0].Env != unsetCredential ||
		!strings.Contains(miss[0].String(), unsetCredential+" is not set") {
		t.Errorf("missing credentials = %+v, want the three probes of without", miss)
	}

	op := &review.Operation{ID: "op-1", LogicalVersion: "v1", Jobs: []review.Job{{Ref: "J1", Status: review.JobQueued}}}
	res := p.Probe(context.Background(), op, withToken)
	if len(res) != 2 || res[0].Class == reconcile.ClassCredential || res[1].Class == reconcile.ClassCredential {
		t.Fatalf("probes with the credential set = %+v, want both sent", res)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer s3cret" || reqs[1].Header.Get("Authorization") != "Bearer s3cret" {
		t.Errorf("requests %v, want both with Authorization: Bearer s3cret", reqs)
	}

	res = p.Probe(context.Background(), op, without)
	if len(res) != 2 {
		t.Fatalf("probes without the credential = %+v, want both results, failed", res)
	}
	for _, r := range res {
		if r.Class != reconcile.ClassCredential || !strings.Contains(r.Err, unsetCredential+" is not set") {
			t.Errorf("%s probe = %+v, want failed for the credential", r.Kind, r)
		}
	}
	if _, err := p.Job(context.Background(), op, without); err == nil || !strings.Contains(err.Error(), unsetCredential) {
		t.Errorf("job poll without the credential: %v, want refused naming it", err)
	}
	if n := len(s.requests()); n != 2 {
		t.Errorf("%d requests in all, want only the two with the credential", n)
	}
}

// TestSandboxSearchPages: against the sandbox, whose search answers one hit
// a page here, two effects of one operation are on two pages, and both are
// read: a case for the duplicate, not a confirmation of the first.
func TestSandboxSearchPages(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		b := setup(t, e, sandbox.Options{SearchLag: searchLag, NoKeySupport: true}, nil)
		d := b.cfg.Destinations["sandbox"]
		search := *d.Probes.Search
		search.URL += "&limit=1"
		search.Next, search.CursorParam = "$.next", "cursor"
		d.Probes.Search = &search
		b.cfg.Destinations["sandbox"] = d

		op := b.ambiguous(t, "folder-1", "sandbox", func(op *review.Operation) { b.createFolder(t, op); b.createFolder(t, op) })
		b.clk.Advance(searchLag + time.Second)
		b.runOnce(t, 1)
		got := b.get(t, op)
		wantState(t, got, review.NeedsReview)
		if ev := lastEvidence(t, got, review.SourceMetadataSearch); len(ev.Candidates) != 2 {
			t.Errorf("search evidence %+v, want both pages' candidates", ev)
		}
	})
}
