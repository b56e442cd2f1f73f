package demo

// `limbo serve --demo`: the sandbox destination in process, a demo tenant
// with a token, a few seeded operations, and a traffic generator built on
// client/ that runs realistic flows for a few tenants against the sandbox
// with moderate faults, so the console fills with confirmed,
// auto-reconciled and escalated operations.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/contract"
	"github.com/limbo-dev/limbo/examples/agent/release"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/sandbox"
	"github.com/limbo-dev/limbo/simulate"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/webhook"
)

// Tenants run traffic; "demo" is the tenant whose token is printed.
var Tenants = []string{"demo", "acme", "globex"}

// demoFaults are the sandbox's faults in the demo: enough to see lost
// answers reconciled, 503s retried and now and then a transformation
// that fails (and the share link waiting on it failed with it), few
// enough to read the console.
var demoFaults = sandbox.Options{Loss: 0.10, Unavailable: 0.05, RateLimited: 0.03, ErrorAfterCommit: 0.02, SearchLag: 2 * time.Second,
	JobFailures: 0.05}

// demoLease is the attempt lease of the demo's sandbox destination.
const demoLease = 15 * time.Second

// Demo is the in-process sandbox and the traffic that runs against it.
type Demo struct {
	log    *slog.Logger
	ln     net.Listener
	sbURL  string
	secret string
	// configured: the demo configured the "sandbox" destination (the
	// --config file did not name one), so its webhooks can be signed.
	configured bool
	sb         *sandbox.Sandbox
	srv        *http.Server
	tokens     map[string]string
	// started is when the sandbox started: operations older than that
	// were seeded, and the demo sends them once they may run (followUp).
	started time.Time
	// What Start seeded, for Welcome.
	history *History
	logins  string
	url     string
}

// New listens for the sandbox on a loopback port and, unless cfg
// already names a "sandbox" destination, configures it there: keys
// honoured, 409 for a key in progress, the search lag, status, search and
// job probes, and a webhook secret. Call it before the store opens: the
// store keeps cfg.
func New(cfg *review.Config, log *slog.Logger) (*Demo, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &Demo{log: log, ln: ln, sbURL: "http://" + ln.Addr().String(), tokens: map[string]string{}}
	if _, named := cfg.Destinations[sandbox.DestinationName]; named {
		return d, nil
	}
	if d.secret, err = webhook.NewSecret(); err != nil {
		ln.Close()
		return nil, err
	}
	// The sandbox listens on loopback, which every outbound request is
	// refused by default; sandbox.LimboConfig opts its address in for the
	// sandbox destination's probes (allow_internal), and nothing else.
	own, err := sandbox.LimboConfig(sandbox.LimboOptions{Base: d.sbURL, HonoursKeys: true,
		SearchLag: demoFaults.SearchLag, Lease: demoLease, WebhookSecret: d.secret, RetryRatio: review.DefaultRetryRatio})
	if err != nil {
		ln.Close()
		return nil, err
	}
	if cfg.Destinations == nil {
		cfg.Destinations = map[string]review.Destination{}
	}
	dest := own.Destinations[sandbox.DestinationName]
	if dest.Actions == nil {
		dest.Actions = map[string]review.ActionConfig{}
	}
	// The catalog at /admin/actions: each demo action's owner, effects and
	// what a duplicate costs. The budgets are left to the defaults, so
	// `limbo policy lint` and the page show what production would add.
	// Each action's request is checked against the schema the sandbox's
	// own OpenAPI document gives its operation (limbo destination import).
	contracts, err := sandboxContracts(d.sbURL)
	if err != nil {
		ln.Close()
		return nil, err
	}
	for _, fl := range append(slices.Clone(simulate.Flavours), simulate.SharePDF) {
		if _, set := dest.Actions[fl.Action]; set {
			continue
		}
		dest.Actions[fl.Action] = review.ActionConfig{Owner: "demo-team", Effects: demoEffects[fl.Action],
			DuplicateCost: demoDuplicateCost[fl.Action], KeyFields: []string{}, Risk: review.Risk(fl.Risk), Flags: serverFlags(fl.Flags),
			Evidence: []review.EvidenceSource{review.SourceResponse, review.SourceStatusLookup, review.SourceMetadataSearch},
			Request:  contracts[fl.Action]}
	}
	// Publishing a press release waits for two reviewers' approval (it is
	// irreversible): the demo seeds one such request.
	dest.Actions[demoApprovalAction] = review.ActionConfig{RequiresApproval: true, Owner: "communications",
		Effects: "publishes a press release on the public site", DuplicateCost: "the release appears twice; a retraction is public",
		KeyFields: []string{}, Risk: review.RiskIrreversible, Flags: []review.Flag{review.FlagIrreversible}, ApprovalTimeout: 24 * time.Hour,
		Evidence: []review.EvidenceSource{review.SourceResponse, review.SourceReviewer}}
	// The example agent's actions on the sandbox, and the sandbox's model
	// as the "model" destination (examples/agent/release/limbo.yaml).
	agentCfg, err := release.Config(d.sbURL)
	if err != nil {
		ln.Close()
		return nil, err
	}
	for name, ac := range agentCfg.Destinations[release.ToolsDestination].Actions {
		dest.Actions[name] = ac
	}
	cfg.Destinations[sandbox.DestinationName] = dest
	if _, named := cfg.Destinations[release.ModelDestination]; !named {
		cfg.Destinations[release.ModelDestination] = agentCfg.Destinations[release.ModelDestination]
	}
	d.configured = true
	return d, nil
}

// demoContracts maps the demo's actions to the sandbox operations they are
// sent as. share_pdf is not among them: its file_ref is the dependency's
// PDF, filled at send time, so its payload is not the request body.
var demoContracts = map[string]string{"create_folder": "createFolder", "upload_file": "uploadFile",
	"transform_pdf": "queueTransformation", "send_email": "sendEmail", "share_link": "publishShareLink", "charge": "createCharge"}

// sandboxContracts imports the request contracts of the demo's actions
// from the sandbox's OpenAPI document.
func sandboxContracts(base string) (map[string]*review.RequestContract, error) {
	block, err := contract.Import(context.Background(), sandbox.OpenAPI(base), contract.Options{Name: sandbox.DestinationName,
		Body: "body", Actions: demoContracts, AllowInternal: true})
	if err != nil {
		return nil, fmt.Errorf("demo: importing the sandbox's contract: %w", err)
	}
	cfg, err := review.ParseConfig(block)
	if err != nil {
		return nil, err
	}
	out := map[string]*review.RequestContract{}
	for a, ac := range cfg.Destinations[sandbox.DestinationName].Actions {
		out[a] = ac.Request
	}
	return out, nil
}

// Start serves the sandbox (its job webhooks signed for limboURL), seeds
// the week of history and the live mix (SeedHistory) into the database
// at dbURL, which st has open, creates the tenants' tokens and seeds the
// demo operations. Call it before the server starts: the history is
// written on a clock of its own, and nothing else may write meanwhile.
// Welcome then prints how to use the demo.
func (d *Demo) Start(ctx context.Context, st *store.Store, dbURL, limboURL string) error {
	if err := checkDemoDatabase(ctx, st); err != nil {
		return err
	}
	d.serveSandbox(limboURL)
	if d.configured { // the history's actions are the demo's own sandbox's
		if err := d.seedHistory(ctx, st, dbURL); err != nil {
			return err
		}
	}
	if err := revokeEarlierTraffic(ctx, st); err != nil {
		return err
	}
	for _, tenant := range Tenants[1:] {
		tok, err := st.CreateToken(ctx, review.Operator("cli:demo"), tenant, trafficToken)
		if err != nil {
			return err
		}
		d.tokens[tenant] = tok
	}
	token, logins, err := seedDemo(ctx, st, d.configured)
	if err != nil {
		return err
	}
	d.tokens["demo"], d.logins, d.url = token, logins, limboURL
	return nil
}

// trafficToken names the tokens the demo's traffic uses, one per tenant.
const trafficToken = "demo traffic"

// revokeEarlierTraffic revokes the traffic tokens an earlier run of the
// demo on this database made (audited, by cli:demo): their secrets lived
// only in that run's memory, so nobody can use them, and each restart
// left a row per tenant on the admin's tokens page. The printed "demo"
// token is left alone: its holder may still use it.
func revokeEarlierTraffic(ctx context.Context, st *store.Store) error {
	ts, err := st.ListTokens(ctx, review.Operator("cli:demo"))
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Name == trafficToken && t.RevokedAt == nil && slices.Contains(Tenants, t.Tenant) {
			if err := st.RevokeToken(ctx, review.Operator("cli:demo"), t.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// serveSandbox serves the sandbox, its job webhooks signed for limboURL.
func (d *Demo) serveSandbox(limboURL string) {
	opts := demoFaults
	opts.Logger = d.log
	if d.configured {
		opts.WebhookURL, opts.WebhookSecret = limboURL+"/api/v1/inbound/"+sandbox.DestinationName, d.secret
	}
	d.sb = sandbox.New(opts)
	d.srv = &http.Server{Handler: d.sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(d.ln)
	d.started = time.Now()
}

// sandboxResource makes in the sandbox what op's action makes (a file,
// a charge…; a transformation's PDF), its metadata naming opID at
// version: a resource a live case is about (MakeResource). Each copy has
// its own Idempotency-Key, so the sandbox's faults (a lost answer, a 503)
// are retried without making a third copy.
func (d *Demo) sandboxResource(ctx context.Context, op *review.Operation, opID, version string, copy int) (review.Candidate, error) {
	fl := flavourOf(op.Action)
	path, fields := fl.Path, map[string]any{}
	if fl.Body != nil {
		fields = fl.Body(op.SourceRef, version)
	}
	if fl.Job { // the job's output, as the job would have left it
		path, fields = "/files", map[string]any{"name": fmt.Sprintf("%s-v%s.pdf", op.SourceRef, version), "content": "PDF of " + op.SourceRef}
	}
	fields["metadata"] = map[string]any{"operation_id": opID, "logical_version": version}
	body, _ := json.Marshal(fields)
	hc := &http.Client{Timeout: 5 * time.Second}
	var last error
	for range 20 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.sbURL+path, bytes.NewReader(body))
		if err != nil {
			return review.Candidate{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("demo-seed-%s-%d", op.ID, copy))
		resp, err := hc.Do(req)
		if err == nil {
			var v simulate.View
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusCreated && v.Ref != "" {
				return review.Candidate{Ref: v.Ref, Kind: cmp.Or(v.Kind, kinds[op.Action]), Version: version, OperationID: opID}, nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		if !simulate.Pause(ctx, 50*time.Millisecond) {
			break
		}
	}
	return review.Candidate{}, fmt.Errorf("demo: making %s's resource in the sandbox: %w", op.Action, last)
}

// seedHistory writes the history through a second store on the same
// database whose clock the seeder sets (st's is the real one).
func (d *Demo) seedHistory(ctx context.Context, st *store.Store, dbURL string) error {
	end := time.Now()
	clk := NewClock(end)
	hs, err := store.Open(ctx, dbURL, store.Options{Config: st.Config(), Clock: clk.Now, MaxConns: 2})
	if err != nil {
		return err
	}
	defer hs.Close()
	if d.history, err = SeedHistory(ctx, hs, clk, end, d.sandboxResource); err != nil {
		return err
	}
	d.log.Info("demo history", "skipped", d.history.Skipped, "operations", d.history.Operations, "took", d.history.Took)
	return nil
}

// Welcome prints what the demo runs and how to use it, the logins last so
// they stay on screen; logFile, when set, is where the server logs.
func (d *Demo) Welcome(stdout io.Writer, logFile string) {
	opts := demoFaults
	fmt.Fprintf(stdout, `
Sandbox destination at %s (faults: %.0f %% lost answers, %.0f %% 503, %.0f %% 429, %.0f %% 500 after commit, %s search lag, %.0f %% of transformations failing).
Demo traffic runs for tenants %v: upload, transform to PDF, share link, send email, charge.
`, d.sbURL, 100*opts.Loss, 100*opts.Unavailable, 100*opts.RateLimited, 100*opts.ErrorAfterCommit, opts.SearchLag, 100*opts.JobFailures, Tenants)
	if !d.configured {
		fmt.Fprintf(stdout, "The configuration names its own %q destination: its probes are used as configured.\n", sandbox.DestinationName)
	}
	switch h := d.history; {
	case h == nil:
	case h.Skipped:
		fmt.Fprintf(stdout, "The database holds the demo's history already (from an earlier --demo run); nothing was added.\n")
	default:
		fmt.Fprintf(stdout, "Seeded %d days of history and open cases for each role: %d operations in %.1f s.\n", HistoryDays, h.Operations, h.Took.Seconds())
	}
	if logFile != "" {
		fmt.Fprintf(stdout, "Server logs: %s (errors are shown here too).\n", logFile)
	}
	fmt.Fprintf(stdout, `
Limbo is running at %s

Console: %s/login — one user per role (demo passwords; never use them elsewhere):
%s  Support decides duplicates and versions that differ; reviewers approve releases and
  irreversible retries (two different reviewers each); managers read the dashboard.

Demo tenant "demo", API token (shown once):
  %s

Try:
  export LIMBO_TOKEN=%s
  curl -s -H "Authorization: Bearer $LIMBO_TOKEN" %s/api/v1/operations
`, d.url, d.url, d.logins, d.tokens["demo"], d.tokens["demo"], d.url)
}

// Close stops the sandbox.
func (d *Demo) Close() {
	if d.srv != nil {
		d.srv.Close()
	}
	if d.sb != nil {
		d.sb.Close()
	}
	d.ln.Close()
}

// Traffic runs two flows at a time per tenant, and the example agent for
// the demo tenant, until ctx ends.
func (d *Demo) Traffic(ctx context.Context, limboURL string) {
	var wg sync.WaitGroup
	if d.configured && d.tokens["demo"] != "" {
		wg.Go(func() { d.agents(ctx, limboURL) })
		wg.Go(func() { d.followUp(ctx, limboURL) })
	}
	for i, tenant := range Tenants {
		tok := d.tokens[tenant]
		if tok == "" {
			continue
		}
		for w := range 2 {
			f := &demoFlow{
				tenant: tenant,
				c:      client.New(limboURL, tok, client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})),
				dest:   simulate.DestClient(5 * time.Second),
				sbURL:  d.sbURL,
				rng:    rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i*2+w))),
				log:    d.log.With("tenant", tenant),
				prefix: fmt.Sprintf("%s-%d-%d", tenant, time.Now().Unix()%100000, w),
			}
			wg.Go(func() { f.loop(ctx) })
		}
	}
	wg.Wait()
}

// releaseFlavour sends an approved press release: published on the public
// site as a link to its page.
var releaseFlavour = simulate.Flavour{Action: demoApprovalAction, Risk: client.RiskIrreversible, Flags: []client.Flag{client.FlagIrreversible},
	Method: http.MethodPost, Path: "/links", Body: func(s, v string) map[string]any { return map[string]any{"file_ref": s + ".html"} }}

// hasFlavour reports whether the demo knows how to send action.
func hasFlavour(action string) bool {
	return action == simulate.SharePDF.Action || action == releaseFlavour.Action ||
		slices.ContainsFunc(simulate.Flavours, func(f simulate.Flavour) bool { return f.Action == action })
}

// followUpEvery is how often followUp looks for seeded operations to send.
const followUpEvery = 3 * time.Second

// followUp stands in for the integrations of the seeded operations: once
// reviewers let one run — a release approved, an irreversible retry
// approved — it sends it, as its integration would. Only operations that
// wait for a reviewer's word (review.RetryNeedsReviewer) and were
// registered before the demo started are its own: the traffic's flows
// carry theirs.
func (d *Demo) followUp(ctx context.Context, limboURL string) {
	flows := map[string]*demoFlow{}
	for i, tenant := range Tenants {
		if tok := d.tokens[tenant]; tok != "" {
			flows[tenant] = &demoFlow{tenant: tenant, c: client.New(limboURL, tok, client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})),
				dest: simulate.DestClient(5 * time.Second), sbURL: d.sbURL, rng: rand.New(rand.NewPCG(uint64(i), 99)),
				log: d.log.With("tenant", tenant, "demo", "follow-up")}
		}
	}
	for simulate.Pause(ctx, followUpEvery) {
		for _, f := range flows {
			for _, state := range []client.State{client.Pending, client.RetryWait} {
				page, err := f.c.List(ctx, state, "", 100)
				if err != nil {
					f.trouble(ctx, "follow-up", err)
					continue
				}
				for _, op := range page.Operations {
					if op.CreatedAt.Before(d.started) && needsReviewer(op) && hasFlavour(op.Action) && !review.IsCompensation(op.Action) {
						f.drive(ctx, op, nil)
					}
				}
			}
		}
	}
}

// demoFlow is one line of a tenant's work: documents uploaded,
// transformed, shared, announced and charged for, in that order.
type demoFlow struct {
	tenant string
	c      *client.Client
	dest   *http.Client
	sbURL  string
	rng    *rand.Rand
	log    *slog.Logger
	prefix string
	docs   int
}

// simulate.Flavour returns the catalogue's simulate.Flavour for an action.
func flavourOf(action string) simulate.Flavour {
	switch action {
	case simulate.SharePDF.Action:
		return simulate.SharePDF
	case releaseFlavour.Action:
		return releaseFlavour
	}
	for _, f := range simulate.Flavours {
		if f.Action == action {
			return f
		}
	}
	panic("demo: no simulate.Flavour " + action)
}

func (f *demoFlow) loop(ctx context.Context) {
	// Stagger the flows so the first operations do not arrive at once.
	simulate.Pause(ctx, time.Duration(f.rng.IntN(3000))*time.Millisecond)
	for ctx.Err() == nil {
		f.docs++
		source := fmt.Sprintf("contract-%s-%d", f.prefix, f.docs)
		f.document(ctx, source, "1")
		// Now and then a new version of the same document: a new key for
		// every step.
		if f.rng.IntN(4) == 0 {
			f.document(ctx, source, "2")
		}
		simulate.Pause(ctx, time.Duration(1000+f.rng.IntN(2000))*time.Millisecond)
	}
}

// document runs the seeds' order for one version of a document: upload,
// transform to PDF, and share a link to the PDF, send the email, and
// sometimes charge for it. The share link is registered with the
// transformation, naming it in after: Limbo grants its attempt only once
// the transformation is confirmed for this version, hands it the PDF the
// transformation produced, and fails it if the transformation fails or
// ran on another version — a rule of the ledger, not of this code.
func (f *demoFlow) document(ctx context.Context, source, version string) {
	step := func() { simulate.Pause(ctx, time.Duration(300+f.rng.IntN(700))*time.Millisecond) }
	file := f.run(ctx, "upload_file", source, version, nil)
	if file == nil || file.State != client.Confirmed || file.Resource == nil {
		return
	}
	step()
	pdf := f.register(ctx, "transform_pdf", source, version, map[string]any{"input_ref": file.Resource.Ref, "format": "pdf"}, nil)
	if pdf == nil {
		return
	}
	link := f.register(ctx, simulate.SharePDF.Action, source, version, nil,
		&client.After{OperationID: pdf.ID, ResourceVersion: version})
	if link == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { f.drive(ctx, pdf, map[string]any{"input_ref": file.Resource.Ref, "format": "pdf"}) })
	if f.rng.IntN(12) == 0 {
		// An integration that crashes between its grant and its send: the
		// lease expires, reconciliation finds nothing, a reviewer decides.
		f.abandon(ctx, link)
	} else {
		link = f.drive(ctx, link, nil)
	}
	wg.Wait()
	if link == nil || link.State != client.Confirmed {
		return
	}
	step()
	f.run(ctx, "send_email", source, version, nil)
	if f.rng.IntN(3) == 0 {
		step()
		f.run(ctx, "charge", source, version, map[string]any{"amount": 9.5 + float64(f.rng.IntN(40)), "currency": "EUR"})
	}
}

// run registers an operation of action and carries it until it settles:
// confirmed, failed, or handed to a reviewer (then the flow moves on).
func (f *demoFlow) run(ctx context.Context, action, source, version string, body map[string]any) *client.Operation {
	op := f.register(ctx, action, source, version, body, nil)
	if op == nil {
		return nil
	}
	return f.drive(ctx, op, body)
}

// register registers an operation of action (waiting for after, when set).
func (f *demoFlow) register(ctx context.Context, action, source, version string, body map[string]any, after *client.After) *client.Operation {
	fl := flavourOf(action)
	if body == nil && fl.Body != nil {
		body = fl.Body(source, version)
	}
	r := fl.Registration(source, version, body)
	r.After = after
	op, _, err := f.c.Register(ctx, r)
	if err != nil {
		f.trouble(ctx, action, err)
		return nil
	}
	return op
}

// drive carries op until it settles, for at most two minutes (a
// dependent's Do waits for its dependency within them).
func (f *demoFlow) drive(ctx context.Context, op *client.Operation, body map[string]any) *client.Operation {
	fl := flavourOf(op.Action)
	if body == nil && fl.Body != nil {
		body = fl.Body(op.SourceRef, op.LogicalVersion)
	}
	action := op.Action
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		switch op.State {
		case client.Pending, client.RetryWait:
			res, err := f.c.Do(ctx, op.ID, client.AttemptOptions{}, simulate.Sender(f.dest, f.sbURL, fl, op, body))
			if err == nil {
				op = res.Operation
				continue
			}
			if !client.IsProblem(err, "not-attemptable") {
				f.trouble(ctx, action, err)
			}
		case client.Accepted:
			if next, err := simulate.FollowJob(ctx, f.c, f.dest, f.sbURL, op); err == nil && next.State != client.Accepted {
				op = next
				continue
			}
		case client.InFlight, client.Ambiguous:
			// Reconciliation's turn.
		default:
			return op
		}
		simulate.Pause(ctx, 500*time.Millisecond)
		if next, err := f.c.Get(ctx, op.ID); err == nil {
			op = next
		}
	}
	return op
}

// abandon takes an attempt of op it never sends nor reports, as an
// integration that crashed right after its grant (once its dependency
// lets it have one).
func (f *demoFlow) abandon(ctx context.Context, op *client.Operation) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := f.c.StartAttempt(ctx, op.ID, client.AttemptOptions{})
		if client.IsProblem(err, "waiting-for-dependency") && simulate.Pause(ctx, 500*time.Millisecond) {
			continue
		}
		if err != nil {
			f.trouble(ctx, op.Action, err)
			return
		}
		break
	}
	f.log.Info("demo: an integration crashed after its grant", "op_id", op.ID, "action", op.Action)
}

func (f *demoFlow) trouble(ctx context.Context, action string, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	f.log.Warn("demo: traffic error", "action", action, "err", err)
}

// demoEmailDomain is the domain of every demo user's email.
const demoEmailDomain = "@demo.example"

// checkDemoDatabase refuses a database holding what the demo did not make:
// a user not at demoEmailDomain, or an API token of a tenant not in
// Tenants or not named as the demo names its tokens. The demo seeds fake
// operations into real-sounding tenants (acme) and console users with
// published passwords, an admin among them; a database the demo seeded
// before passes, so a second --demo adds nothing.
func checkDemoDatabase(ctx context.Context, st *store.Store) error {
	var foreign []string
	us, err := st.ListUsers(ctx, review.Operator("cli:demo"))
	if err != nil {
		return err
	}
	for _, u := range us {
		if !strings.HasSuffix(u.Email, demoEmailDomain) {
			foreign = append(foreign, "user "+u.Email)
		}
	}
	ts, err := st.ListTokens(ctx, review.Operator("cli:demo"))
	if err != nil {
		return err
	}
	for _, t := range ts {
		if !slices.Contains(Tenants, t.Tenant) || (t.Name != "demo" && t.Name != trafficToken) {
			foreign = append(foreign, fmt.Sprintf("API token %q of tenant %s", t.Name, t.Tenant))
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	if len(foreign) > 3 {
		foreign = append(foreign[:3], fmt.Sprintf("%d more", len(foreign)-3))
	}
	return fmt.Errorf("the database holds data the demo did not make (%s): --demo seeds fake operations into tenants %s "+
		"and console users whose passwords are published (admin%s / admin-demo-password); give the demo a database of its own, "+
		"e.g. --db sqlite:limbo-demo.db", strings.Join(foreign, ", "), strings.Join(Tenants, ", "), demoEmailDomain)
}

// seedDemo creates the demo tenant's token, seeds the demo operations and
// the demo users. It returns the token and the logins to print.
func seedDemo(ctx context.Context, st *store.Store, approval bool) (token, logins string, err error) {
	if token, err = st.CreateToken(ctx, review.Operator("cli:demo"), "demo", "demo"); err != nil {
		return "", "", err
	}
	if err := seedDemoOperations(ctx, st, approval); err != nil {
		return "", "", err
	}
	if logins, err = seedDemoUsers(ctx, st); err != nil {
		return "", "", err
	}
	return token, logins, nil
}

// seedDemoUsers makes one console user per role with a fixed demo password
// (so a second --demo run on the same database prints logins that work),
// and a second reviewer: an irreversible retry or release needs two.
func seedDemoUsers(ctx context.Context, st *store.Store) (string, error) {
	var b strings.Builder
	type login struct {
		name string
		role review.Role
	}
	var users []login
	for _, r := range review.AllRoles() {
		users = append(users, login{string(r), r})
		if r == review.RoleReviewer {
			users = append(users, login{"reviewer2", r})
		}
	}
	for _, u := range users {
		email, pw := u.name+demoEmailDomain, u.name+"-demo-password"
		_, err := st.AddUser(ctx, review.Operator("cli:demo"), store.NewUser{Email: email, Password: pw, Role: u.role, Scope: review.Scope{All: true}})
		if err != nil && !errors.Is(err, review.ErrConflict) {
			return "", err
		}
		fmt.Fprintf(&b, "  %-9s %-26s %s\n", u.role, email, pw)
	}
	return b.String(), nil
}

// demoApprovalAction is the demo's action that needs approval before it runs.
const demoApprovalAction = "publish_release"

// demoEffects and demoDuplicateCost fill the demo's action catalog.
var demoEffects = map[string]string{
	"search_files": "searches the files (no effect)", "generate_summary": "writes a summary file",
	"create_folder": "creates a folder", "upload_file": "uploads a contract file", "transform_pdf": "converts a file to PDF (a job)",
	"send_email": "emails the client", "share_link": "publishes a share link", "charge": "charges the client's card",
	"share_pdf": "publishes a share link to the PDF of a confirmed transformation (waits for it)",
}

var demoDuplicateCost = map[string]string{
	"search_files": "none", "generate_summary": "one model call and a second file", "create_folder": "none: the key deduplicates it",
	"upload_file": "a second copy to delete", "transform_pdf": "a conversion credit and a second PDF", "send_email": "the client gets the email twice",
	"share_link": "a second public link", "charge": "EUR 12.50 charged twice",
	"share_pdf": "a second public link",
}

// seedDemoOperations runs a few operations through the real ledger so the
// demo shows every kind of ending: confirmed, ambiguous, waiting to retry,
// failed, an accepted job, and a request awaiting approval. Already seeded
// operations are left alone.
func seedDemoOperations(ctx context.Context, st *store.Store, approval bool) error {
	demos := []struct {
		source, action string
		risk           review.Risk
		outcome        review.Outcome
	}{
		{"contract-583", "render_pdf", review.RiskCompensableWrite, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 201,
			Resource: &review.ResourceRef{Ref: "file-9f2c", Kind: "file", Version: "7"}}},
		{"contract-584", "create_folder", review.RiskCompensableWrite, review.Outcome{Result: review.ResultTimeout, Phase: review.PhaseAfterSend}},
		{"invoice-1204", "send_email", review.RiskIrreversible, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 502}},
		{"summary-77", "generate_summary", review.RiskGenerate, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 429, RetryAfter: "30"}},
		{"contract-585", "render_pdf", review.RiskCompensableWrite, review.Outcome{Result: review.ResultError, Phase: review.PhaseAfterSend, HTTPStatus: 422, ProviderCode: "unsupported_font"}},
		{"contract-586", "transform_docx", review.RiskCompensableWrite, review.Outcome{Result: review.ResultSuccess, Phase: review.PhaseAfterSend, HTTPStatus: 202,
			Job: &review.JobRef{Ref: "job-31", Status: "queued"}}},
	}
	if approval { // the action needs approval only where the demo configures the sandbox
		if _, _, err := st.Register(ctx, review.Registration{Tenant: "demo", SourceRef: "press-release-12", LogicalVersion: "1",
			Action: demoApprovalAction, Destination: sandbox.DestinationName, Risk: review.RiskIrreversible, Flags: []review.Flag{review.FlagIrreversible},
			Payload: []byte(`{"channel":"newsroom","title":"Limbo 1.0 is out"}`), Actor: "cli:demo", RequestedBy: "cli:demo"}); err != nil {
			return err
		}
	}
	// The actions the sandbox's contract checks carry their request; the
	// others a note of what they are about.
	payloads := map[string]string{
		"create_folder": `{"body":{"name":"contract-584"},"method":"POST","path":"/folders"}`,
		"send_email":    `{"body":{"subject":"Invoice 1204","to":"billing@example.com"},"method":"POST","path":"/emails"}`,
	}
	for _, d := range demos {
		payload := cmp.Or(payloads[d.action], `{"source":"`+d.source+`","version":7}`)
		op, created, err := st.Register(ctx, review.Registration{Tenant: "demo", SourceRef: d.source, LogicalVersion: "7",
			Action: d.action, Destination: sandbox.DestinationName, Risk: d.risk, Payload: []byte(payload), Actor: "cli:demo"})
		if err != nil {
			return err
		}
		if !created {
			continue
		}
		g, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "demo", OperationID: op.ID, Actor: "cli:demo"})
		if err != nil {
			return err
		}
		if _, err := st.RecordOutcome(ctx, "demo", op.ID, g.N, d.outcome, "cli:demo"); err != nil {
			return err
		}
	}
	return nil
}

// agentEvery is how often the demo starts a release-notes run.
const agentEvery = 45 * time.Second

// agents runs the example agent for the demo tenant: a new release-notes
// run every agentEvery (some with a scripted model fault: a plan that
// breaks its schema, a rate limit, malformed arguments, a repeated call),
// and every unfinished run resumed each round — so the console shows its
// tool calls, its notifications waiting for approval, and the runs that
// carry on once a reviewer approved.
func (d *Demo) agents(ctx context.Context, limboURL string) {
	a := &release.Agent{Limbo: client.New(limboURL, d.tokens["demo"], client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})),
		Sandbox: d.sbURL, HTTP: &http.Client{Timeout: 5 * time.Second}, Log: d.log}
	faults := [][]string{nil, {"malformed_output"}, {"rate_limit"}, {"malformed_arguments"}, {"repeat_call"}, {"server_error"}}
	open := map[string]string{} // run id → release
	tick := time.NewTicker(agentEvery)
	defer tick.Stop()
	for n := 1; ; n++ {
		if f := faults[n%len(faults)]; f != nil {
			_ = d.sb.QueueModelFaults(f...)
		}
		open[fmt.Sprintf("release-%d-%d", time.Now().Unix()%100000, n)] = fmt.Sprintf("v1.%d", n)
		for id, version := range open {
			rep, err := a.Run(ctx, id, version)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				d.log.Warn("demo agent", "run", id, "err", err)
			case rep.Done:
				delete(open, id)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serverFlags are a flavour's flags as the configuration has them.
func serverFlags(fs []client.Flag) []review.Flag {
	out := make([]review.Flag, len(fs))
	for i, f := range fs {
		out[i] = review.Flag(f)
	}
	return out
}

// needsReviewer is review.RetryNeedsReviewer for an operation read through
// the API: a retry of it waits for a reviewer's word.
func needsReviewer(op *client.Operation) bool {
	return op.HasFlag(client.FlagFinancial) || op.HasFlag(client.FlagIrreversible) || op.HasFlag(client.FlagRegulated) ||
		op.Risk == client.RiskIrreversible
}
