package handlers_test

// The destination's ground truth for the property test (property_test.go):
// what really exists at each destination, which keys it still remembers,
// what its search shows inside its lag, how its jobs run — and a probe
// server on 127.0.0.1 that answers the reconciler from it. Authoritative
// answers (probes, the integrator's authoritative evidence, signed
// webhooks, job reports) are always true to this world; only the search lag
// hides what exists, as a real destination's does.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// Destination names of the property test and what each guarantees.
const (
	// destKeys honours idempotency keys for keysRetention, offers status
	// lookup, search and job probes, and signs webhooks.
	destKeys = "keys"
	// destPlain does not honour keys; it offers the same probes and
	// webhooks, and takes at most plainConcurrency attempts at once.
	destPlain = "plain"
	// destBlind has no probes and sends no webhooks: only the integrator's
	// evidence and a person can settle what happens there.
	destBlind = "blind"

	propLease     = 10 * time.Second
	keysRetention = 20 * time.Second
	keysLag       = 3 * time.Second
	plainLag      = 8 * time.Second
	// plainConcurrency is destPlain's concurrency limit: its first
	// attempts are counted under its lock (the fast path's attempt_limited
	// plan), and some are turned away to wait.
	plainConcurrency = 1
)

// propConfig is the configuration the property test runs under; probes
// go to base, the world's probe server, where destPlain answers in style.
func propConfig(base string, style probeStyle) *review.Config {
	probes := func(dest string) review.Probes {
		p := review.Probes{
			Status: &review.Probe{URL: base + "/" + dest + "/status?ref={{.ResourceRef}}&job={{.JobRef}}&op={{.ID}}"},
			// Every search names its cursor: the paged style uses it.
			Search: &review.Probe{URL: base + "/" + dest + "/search?op={{.ID}}", Candidates: "results", Next: "$.next", CursorParam: "page"},
			Job:    &review.Probe{URL: base + "/" + dest + "/jobs/{{.JobRef}}"},
		}
		if dest == destPlain && style == styleAnonymous {
			// A credential whose variable nobody set.
			for _, pr := range []*review.Probe{p.Status, p.Search, p.Job} {
				pr.AuthHeader, pr.AuthEnv = "Authorization", "LIMBO_PROPERTY_UNSET_TOKEN"
			}
		}
		return p
	}
	loopback := review.AllowList{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	return &review.Config{Destinations: map[string]review.Destination{
		destKeys: {HonoursKeys: true, KeyRetention: keysRetention, ConflictMeansInProgress: true, Lease: propLease,
			SearchLag: keysLag, Probes: probes(destKeys), AllowInternal: loopback, WebhookSecrets: []string{filesSecret}},
		destPlain: {Lease: propLease, SearchLag: plainLag, Probes: probes(destPlain), AllowInternal: loopback,
			WebhookSecrets: []string{filesSecret}, Concurrency: plainConcurrency},
		destBlind: {Lease: propLease},
	}}
}

// lagOf is each destination's real search lag: the configured one (a
// destination that lags longer than it says is issue 12 hole 16, the
// confirm window's to catch).
func lagOf(dest string) time.Duration {
	switch dest {
	case destKeys:
		return keysLag
	case destPlain:
		return plainLag
	}
	return 0
}

// resource is one effect a destination performed: a created resource, or
// an accepted job (whose output is part of the job's effect).
type resource struct {
	Ref, Kind, Dest string
	// OpID and Version are the metadata the resource carries.
	OpID, Version string
	At            time.Time
	// Job status and output, for kind "job".
	JobStatus review.JobStatus
	Output    string
	// Undone: a reviewer compensated it (deleted it at the destination).
	Undone bool
}

// live reports whether the resource is an effect that stands: a job that
// failed left nothing behind.
func (r *resource) live() bool {
	return !r.Undone && (r.Kind != "job" || (r.JobStatus != review.JobFailed && r.JobStatus != review.JobCanceled))
}

// undo deletes the resource named ref at dest (a compensation), and
// reports whether there was one to delete.
func (w *world) undo(dest, ref string) bool {
	r := w.byRef(dest, ref)
	if r == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r.Undone = true
	return true
}

// keyMemory is what a destination that honours keys remembers of one key.
type keyMemory struct {
	since time.Time
	res   *resource
}

// probeStyle is how a destination answers probes: what it holds is always
// the truth, but a real destination pages, repeats, garbles, lags longer
// than it says, forgets jobs or shows an anonymous caller nothing. Each
// style but the clean one meets a hole the reconciler still has (issue 12
// holes 9–16, the probes branch); the property test draws only the styles
// in probeStyles.
type probeStyle string

const (
	styleClean probeStyle = "clean"
	// stylePaged: the search answers one candidate a page, after a first
	// page that is empty (a sharded index), "next" naming the following
	// page (hole 12).
	stylePaged probeStyle = "paged"
	// styleRepeats: the search lists every candidate twice (hole 10).
	styleRepeats probeStyle = "repeats"
	// styleGarbled: the search's answer is broken — JSON followed by an
	// error page, a duplicate "results" member, "results": null (hole 13).
	styleGarbled probeStyle = "garbled"
	// styleLaggy: the search lags twice as long as configured (holes 16 and 9).
	styleLaggy probeStyle = "laggy"
	// styleJobsUnindexed: job lookups fail with 500 (hole 15), and the
	// search lists a job's output once it succeeded instead of the job.
	// (A search that never showed an unfinished job would make a job whose
	// answer was lost undiscoverable: no ledger could tell it from
	// absence. The property test found that; it is the destination's
	// configuration that would be wrong, not Limbo.)
	styleJobsUnindexed probeStyle = "jobs_unindexed"
	// styleAnonymous: the probe credential's variable is unset, and the
	// destination shows an anonymous caller an empty search (hole 14).
	styleAnonymous probeStyle = "anonymous"
)

// world is the ground truth of every destination.
type world struct {
	mu        sync.Mutex // the probe server reads it from the reconciler's goroutines
	now       func() time.Time
	resources []*resource
	keys      map[string]*keyMemory // by destination and key
	seq       int
	// style is how destPlain answers probes (the others answer cleanly).
	style probeStyle
	// garbled counts broken answers, to vary them.
	garbled int
}

func (w *world) styleOf(dest string) probeStyle {
	if dest == destPlain && w.style != "" {
		return w.style
	}
	return styleClean
}

func newWorld(now func() time.Time) *world {
	return &world{now: now, keys: map[string]*keyMemory{}}
}

// perform is the destination processing one request of operation opID
// (version, key) at dest: at a destination that honours keys and still
// remembers key, the resource it made before; otherwise a new one.
func (w *world) perform(dest, opID, version, key string, job bool) (res *resource, created bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	k := dest + " " + key
	if m := w.keys[k]; dest == destKeys && m != nil && now.Sub(m.since) < keysRetention {
		return m.res, false
	}
	w.seq++
	res = &resource{Ref: fmt.Sprintf("%s-res-%d", dest, w.seq), Kind: "folder", Dest: dest, OpID: opID, Version: version, At: now}
	if job {
		res.Ref, res.Kind, res.JobStatus = fmt.Sprintf("%s-job-%d", dest, w.seq), "job", review.JobQueued
	}
	w.resources = append(w.resources, res)
	if dest == destKeys {
		w.keys[k] = &keyMemory{since: now, res: res}
	}
	return res, true
}

// remembers reports whether dest still remembers a request made under
// key: it replays that request's answer instead of processing it again
// (so it can no longer refuse the payload as invalid).
func (w *world) remembers(dest, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.keys[dest+" "+key]
	return dest == destKeys && m != nil && w.now().Sub(m.since) < keysRetention
}

// advanceJob moves a job one step on: queued → running → succeeded (or
// failed, when fail).
func (w *world) advanceJob(r *resource, fail bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.JobStatus {
	case review.JobQueued:
		r.JobStatus = review.JobRunning
	case review.JobRunning:
		if fail {
			r.JobStatus = review.JobFailed
			return
		}
		w.seq++
		r.JobStatus, r.Output = review.JobSucceeded, fmt.Sprintf("%s-out-%d", r.Dest, w.seq)
	}
}

// finishJobs lets every unfinished job succeed (the settling phase: a
// destination's jobs end).
func (w *world) finishJobs() {
	for _, r := range w.all() {
		if r.Kind == "job" {
			for !r.JobStatus.Done() {
				w.advanceJob(r, false)
			}
		}
	}
}

// all returns every resource, in creation order.
func (w *world) all() []*resource {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*resource(nil), w.resources...)
}

// of returns the resources carrying operation opID's metadata.
func (w *world) of(opID string) []*resource {
	var out []*resource
	for _, r := range w.all() {
		if r.OpID == opID {
			out = append(out, r)
		}
	}
	return out
}

// liveOf returns the live effects of operation opID.
func (w *world) liveOf(opID string) []*resource {
	var out []*resource
	for _, r := range w.of(opID) {
		if r.live() {
			out = append(out, r)
		}
	}
	return out
}

// visible reports whether the destination's search shows r by now: past
// its lag (twice the configured one at a laggy destination).
func (w *world) visible(r *resource) bool {
	lag := lagOf(r.Dest)
	if w.styleOf(r.Dest) == styleLaggy {
		lag *= 2
	}
	return !w.now().Before(r.At.Add(lag))
}

// search is what the destination's metadata search for opID answers now:
// the resources naming it that are past the search lag (where jobs are
// not indexed, a job's output once it succeeded instead of the job).
func (w *world) search(dest, opID string) []review.Candidate {
	out := []review.Candidate{}
	for _, r := range w.of(opID) {
		switch {
		case r.Dest != dest || r.Undone || !w.visible(r):
		case r.Kind == "job" && w.styleOf(dest) == styleJobsUnindexed:
			switch {
			case r.JobStatus == review.JobSucceeded:
				out = append(out, review.Candidate{Ref: r.Output, Kind: "file", Version: r.Version, OperationID: r.OpID})
			case r.live():
				out = append(out, r.candidate())
			}
		default:
			out = append(out, r.candidate())
		}
	}
	return out
}

// byRef finds a resource by its ref (a job also by its output ref).
func (w *world) byRef(dest, ref string) *resource {
	for _, r := range w.all() {
		if r.Dest == dest && ref != "" && !r.Undone && (r.Ref == ref || r.Output == ref) {
			return r
		}
	}
	return nil
}

func (r *resource) candidate() review.Candidate {
	return review.Candidate{Ref: r.Ref, Kind: r.Kind, Version: r.Version, OperationID: r.OpID}
}

// truth is the world as review.CheckInvariants reads it.
func (w *world) truth() []review.TrueEffect {
	var out []review.TrueEffect
	for _, r := range w.all() {
		out = append(out, review.TrueEffect{OperationID: r.OpID, LogicalVersion: r.Version, Ref: r.Ref, Compensated: !r.live()})
	}
	return out
}

// ServeHTTP is the destinations' probe API:
//
//	GET /{dest}/search?op=ID        {"results": [candidates past the lag]}
//	GET /{dest}/status?ref=R&job=J  the resource R (or job J), 404 when unknown
//	GET /{dest}/jobs/J              {"ref", "operation_id", "status", "output_ref", "logical_version"}, 404 when unknown
func (w *world) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var dest, rest string
	if _, err := fmt.Sscanf(r.URL.Path, "/%s", &rest); err != nil {
		http.NotFound(rw, r)
		return
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			dest, rest = rest[:i], rest[i+1:]
			break
		}
	}
	q := r.URL.Query()
	style := w.styleOf(dest)
	answer := func(v any) {
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(v)
	}
	switch {
	case style == styleAnonymous && r.Header.Get("Authorization") == "":
		answer(map[string]any{"results": []review.Candidate{}}) // nothing is public
	case rest == "search":
		w.answerSearch(rw, style, w.search(dest, q.Get("op")), q.Get("page"))
	case rest == "status":
		res := w.byRef(dest, q.Get("ref"))
		if res == nil {
			res = w.byRef(dest, q.Get("job"))
		}
		switch {
		case res != nil && res.Kind == "job" && style == styleJobsUnindexed:
			http.Error(rw, "job store unavailable", http.StatusInternalServerError)
		case res == nil:
			http.NotFound(rw, r)
		default:
			answer(res.candidate())
		}
	case len(rest) > 5 && rest[:5] == "jobs/":
		res := w.byRef(dest, rest[5:])
		switch {
		case res == nil || res.Kind != "job":
			http.NotFound(rw, r)
		case style == styleJobsUnindexed:
			http.Error(rw, "job store unavailable", http.StatusInternalServerError)
		default:
			w.mu.Lock()
			// The job by name and whose it is, as a real destination's
			// answer says them (the prober refuses one that does not).
			ans := map[string]any{"ref": res.Ref, "operation_id": res.OpID, "status": res.JobStatus, "output_ref": res.Output, "logical_version": res.Version}
			w.mu.Unlock()
			answer(ans)
		}
	default:
		http.NotFound(rw, r)
	}
}

// answerSearch writes the search's answer, cands, in the style.
func (w *world) answerSearch(rw http.ResponseWriter, style probeStyle, cands []review.Candidate, page string) {
	rw.Header().Set("Content-Type", "application/json")
	body, _ := json.Marshal(map[string]any{"results": cands})
	switch style {
	case stylePaged:
		i := 0
		fmt.Sscanf(page, "%d", &i)
		p := map[string]any{"results": []review.Candidate{}}
		if i > 0 && i <= len(cands) {
			p["results"] = cands[i-1 : i]
		}
		if i < len(cands) {
			p["next"] = fmt.Sprint(i + 1)
		}
		body, _ = json.Marshal(p)
	case styleRepeats:
		body, _ = json.Marshal(map[string]any{"results": append(append([]review.Candidate{}, cands...), cands...)})
	case styleGarbled:
		w.mu.Lock()
		w.garbled++
		n := w.garbled
		w.mu.Unlock()
		switch n % 3 {
		case 0:
			body = []byte(`{"results":[]} <html><body>500 Internal Server Error</body></html>`)
		case 1:
			list, _ := json.Marshal(cands)
			body = []byte(`{"results":` + string(list) + `,"results":[]}`)
		default:
			body = []byte(`{"results":null}`)
		}
	}
	rw.Write(body)
}

// sortedRefs lists refs for messages.
func sortedRefs(rs []*resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Ref
	}
	sort.Strings(out)
	return out
}
