// Package sandbox is a small file and transformation API with fault
// injection and ground truth: the destination Limbo's fault tests, `limbo
// sandbox`, `limbo chaos` and the demo talk to.
//
// It creates folders, files, transformation jobs (which finish on their own
// and announce it with a signed webhook), share links, emails and charges;
// answers status lookups and a metadata search that lags behind writes; and
// records every effect it really performed, so a test can compare what Limbo
// believes with what happened. Faults (lost answers, 429, 503,
// 500-after-commit, delay, no idempotency-key support) are drawn from a
// seeded source, and apply to mutating requests; probes answer the truth
// unless Options.ProbeErrors faults them (a 5xx, a hang, garbage with 200),
// and never change it.
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Effect is one effect the sandbox really performed: a resource created by a
// mutating request. A replay under an idempotency key is not a new effect;
// the output file of a job is part of the job's effect, not one of its own.
type Effect struct {
	OperationID    string
	LogicalVersion string
	ResourceRef    string
	Kind           string
	// Compensated is set once DELETE /resources/{ref} undid the effect.
	Compensated bool
	// Failed is set when the effect is a job that ended failed: it made
	// nothing, so it is no effect, though the job is still listed.
	Failed bool
	At     time.Time
}

// Resource kinds.
const (
	KindFolder = "folder"
	KindFile   = "file"
	KindJob    = "job"
	KindLink   = "link"
	KindEmail  = "email"
	KindCharge = "charge"
)

// Job statuses, as review.JobStatus spells them.
const (
	JobQueued    = "queued"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCanceled  = "canceled"
)

// Resource statuses on lookup (a job shows its job status instead of active).
const (
	StatusActive      = "active"
	StatusCompensated = "compensated"
)

var refPrefix = map[string]string{
	KindFolder: "fld", KindFile: "file", KindJob: "job",
	KindLink: "lnk", KindEmail: "eml", KindCharge: "chg",
}

// resource is anything the sandbox holds.
type resource struct {
	ref, kind                   string
	operationID, logicalVersion string
	metadata                    map[string]any
	// attrs are the kind's own fields (name, to, amount…), shown on lookup.
	attrs       map[string]any
	createdAt   time.Time
	compensated bool
	// jobRef names the job whose output this file is; such outputs are not
	// effects of their own and stay out of search unless asked for.
	jobRef string
	// effect indexes Sandbox.effects, or is -1 for a job output.
	effect int
	// job is set for kind "job".
	job *job
	// versions is a file's history once a second version was uploaded
	// or the history was asked for (versions.go).
	versions []fileVersion
}

type job struct {
	status    string
	inputRef  string
	format    string
	outputRef string
	// inputVersion is the input file's logical version when the job was
	// queued: the version it runs on, whatever is uploaded after.
	inputVersion string
}

// Sandbox is one in-memory destination. Its methods are safe for concurrent use.
type Sandbox struct {
	opts   Options
	now    func() time.Time
	log    *slog.Logger
	seed   int64
	mux    *http.ServeMux
	client *http.Client

	rngMu sync.Mutex
	rng   *rand.Rand
	// probeRng draws the probes' faults: a stream of its own, so that the
	// number of probes does not shift the mutating requests' draws.
	probeRng *rand.Rand
	// jobRng draws which jobs fail (Options.JobFailures), a stream of its
	// own for the same reason; under mu.
	jobRng *rand.Rand
	// probeErrors is Options.ProbeErrors, changed by SetProbeErrors; under rngMu.
	probeErrors float64
	probeCount  probeCounters

	mu        sync.Mutex
	seq       int
	resources map[string]*resource
	order     []*resource
	effects   []Effect
	keys      map[string]*keyEntry
	closed    bool
	// The sandbox model (model.go): completions generated, faults queued.
	modelCalls  int
	modelFaults []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a sandbox with the given options, which the caller has
// validated (Options.Validate). Close it to stop job completion and webhooks.
func New(opts Options) *Sandbox {
	if opts.JobDuration == 0 {
		opts.JobDuration = DefaultJobDuration
	}
	if opts.ProbeHang == 0 {
		opts.ProbeHang = DefaultProbeHang
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	seed := opts.Seed
	for seed == 0 {
		seed = rand.Int64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sandbox{
		opts:        opts,
		now:         now,
		log:         log,
		seed:        seed,
		client:      &http.Client{Timeout: 5 * time.Second},
		rng:         rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)),
		probeRng:    rand.New(rand.NewPCG(uint64(seed)^0x5bd1e9955bd1e995, uint64(seed))),
		jobRng:      rand.New(rand.NewPCG(uint64(seed)^0x2545f4914f6cdd1d, uint64(seed)^0x5bd1e995)),
		probeErrors: opts.ProbeErrors,
		resources:   make(map[string]*resource),
		keys:        make(map[string]*keyEntry),
		ctx:         ctx,
		cancel:      cancel,
	}
	s.mux = s.routes()
	return s
}

func (s *Sandbox) routes() *http.ServeMux {
	release := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"version": r.PathValue("version"), "changes": []string{
			"faster uploads for large folders", "share links can expire", "fixed: PDF export of rotated pages"}})
	}
	// Mutating routes are faulted and keyed by Idempotency-Key; probes
	// answer the truth unless ProbeErrors faults them, and are read-only.
	handlers := map[string]http.Handler{
		"createFolder":        s.mutating(s.createFolder),
		"uploadFile":          s.mutating(s.createFile),
		"uploadFileVersion":   s.mutating(s.uploadVersion),
		"queueTransformation": s.mutating(s.createJob),
		"publishShareLink":    s.mutating(s.createLink),
		"sendEmail":           s.mutating(s.createEmail),
		"createCharge":        s.mutating(s.createCharge),
		"moveResource":        s.mutating(s.moveResource),
		"deleteResource":      s.mutating(s.compensate),
		"getResource":         s.probe(s.getResource),
		"getResourceHistory":  s.probe(s.getHistory),
		"getJob":              s.probe(s.getJob),
		"searchByOperation":   s.probe(s.search),
		"getTruth":            http.HandlerFunc(s.truth),
		// The sandbox model: OpenAI-shaped chat completions (model.go).
		"createChatCompletion": http.HandlerFunc(s.chatCompletions),
		"scriptModelFaults":    http.HandlerFunc(s.scriptModelFaults),
		// A read for agents: a release's changes (fixed, no effect, no fault).
		"getRelease": http.HandlerFunc(release),
		"healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}),
		// The document names the address it was asked at as its server.
		"getOpenAPI": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeRaw(w, http.StatusOK, OpenAPI("http://"+r.Host)) }),
	}
	m := http.NewServeMux()
	for _, r := range routeTable {
		h, ok := handlers[r.operationID]
		if !ok {
			panic("sandbox: no handler for " + r.operationID)
		}
		m.Handle(r.method+" "+r.path, h)
	}
	return m
}

// Handler serves the sandbox's HTTP API.
func (s *Sandbox) Handler() http.Handler { return s.mux }

// Seed reports the seed of the fault draws (chosen at random when Options.Seed was 0).
func (s *Sandbox) Seed() int64 { return s.seed }

// Truth returns every effect performed so far, in order.
func (s *Sandbox) Truth() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Effect, len(s.effects))
	copy(out, s.effects)
	return out
}

// Close stops job completion, webhook deliveries and probes held by a hang
// fault, and waits for them. Jobs still queued stay queued. The handler
// keeps answering.
func (s *Sandbox) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// add stores a new resource, and its effect unless it is a job output.
// The caller holds s.mu.
func (s *Sandbox) add(kind string, md map[string]any, attrs map[string]any, jobRef string) *resource {
	s.seq++
	r := &resource{
		ref:            fmt.Sprintf("%s-%06d", refPrefix[kind], s.seq),
		kind:           kind,
		operationID:    stringField(md, "operation_id"),
		logicalVersion: stringField(md, "logical_version"),
		metadata:       md,
		attrs:          attrs,
		createdAt:      s.now(),
		jobRef:         jobRef,
		effect:         -1,
	}
	if jobRef == "" {
		r.effect = len(s.effects)
		s.effects = append(s.effects, Effect{
			OperationID: r.operationID, LogicalVersion: r.logicalVersion,
			ResourceRef: r.ref, Kind: kind, At: r.createdAt,
		})
	}
	s.resources[r.ref] = r
	s.order = append(s.order, r)
	return r
}

// status is what a lookup says about r. The caller holds s.mu.
func (r *resource) status() string {
	switch {
	case r.compensated:
		return StatusCompensated
	case r.job != nil:
		return r.job.status
	}
	return StatusActive
}

// view is r as a lookup or a create answers it. The caller holds s.mu.
func (r *resource) view() map[string]any {
	v := make(map[string]any, len(r.attrs)+9)
	for k, a := range r.attrs {
		v[k] = a
	}
	v["ref"] = r.ref
	v["kind"] = r.kind
	// version is the logical version the metadata names: what a reconciler
	// compares against the operation's.
	v["version"] = r.logicalVersion
	v["operation_id"] = r.operationID
	v["logical_version"] = r.logicalVersion
	v["status"] = r.status()
	v["metadata"] = r.metadata
	v["created_at"] = r.createdAt.UTC().Format(time.RFC3339Nano)
	if r.jobRef != "" {
		v["job_ref"] = r.jobRef
	}
	if r.job != nil && r.job.outputRef != "" {
		v["output_ref"] = r.job.outputRef
	}
	return v
}

func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	writeRaw(w, status, body)
}

// writeRaw writes a rendered JSON answer; a nil body writes the status alone.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	if body == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
	w.Write([]byte{'\n'})
}

// apiError is the body of every error answer: a stable code and, for
// invalid requests, a detail.
type apiError struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}
