// Package simulate holds the simulated integrations of `limbo chaos` and the
// demo: what each kind of operation sends to the sandbox destination, and
// how its answer becomes an outcome for Limbo.
package simulate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/limbo-dev/limbo/client"
	"github.com/limbo-dev/limbo/sandbox"
)

// Flavour is one kind of operation an integration runs against the sandbox.
type Flavour struct {
	Action string
	Risk   client.Risk
	Flags  []client.Flag
	Method string
	Path   string
	// Job: the destination answers 202 with a transformation job, which the
	// integration follows until it completes.
	Job bool
	// Body is the request body, without the metadata naming the operation.
	Body func(source, version string) map[string]any
	// FromDependency names the body member an attempt fills with the ref
	// its operation's dependency was confirmed with (the grant's
	// after.resource): a share link publishes the PDF the transformation
	// it waits for produced, whichever that turns out to be.
	FromDependency string
}

// Flavours covers every risk class and flag: a read (a search), a
// generate, an idempotent and a compensable write, a transformation job,
// irreversible sends and publications, and a financial charge.
var Flavours = []Flavour{
	{Action: "search_files", Risk: client.RiskRead, Method: http.MethodGet, Path: "/search"},
	{Action: "generate_summary", Risk: client.RiskGenerate, Method: http.MethodPost, Path: "/files",
		Body: func(s, v string) map[string]any {
			return map[string]any{"name": s + "-v" + v + "-summary.txt", "content": "summary of " + s}
		}},
	{Action: "create_folder", Risk: client.RiskIdempotentWrite, Method: http.MethodPost, Path: "/folders",
		Body: func(s, v string) map[string]any { return map[string]any{"name": s + "-v" + v} }},
	{Action: "upload_file", Risk: client.RiskCompensableWrite, Method: http.MethodPost, Path: "/files",
		Body: func(s, v string) map[string]any {
			return map[string]any{"name": s + "-v" + v + ".docx", "content": "contract " + s + " version " + v}
		}},
	{Action: "transform_pdf", Risk: client.RiskCompensableWrite, Method: http.MethodPost, Path: "/jobs", Job: true,
		Body: func(s, v string) map[string]any {
			return map[string]any{"input_ref": s + "-v" + v + ".docx", "format": "pdf"}
		}},
	{Action: "send_email", Risk: client.RiskIrreversible, Method: http.MethodPost, Path: "/emails",
		Body: func(s, v string) map[string]any {
			return map[string]any{"to": "client+" + s + "@example.com", "subject": s + " version " + v + " is ready"}
		}},
	{Action: "share_link", Risk: client.RiskIrreversible, Flags: []client.Flag{client.FlagIrreversible}, Method: http.MethodPost, Path: "/links",
		Body: func(s, v string) map[string]any { return map[string]any{"file_ref": s + "-v" + v + ".pdf"} }},
	{Action: "charge", Risk: client.RiskIrreversible, Flags: []client.Flag{client.FlagFinancial}, Method: http.MethodPost, Path: "/charges",
		Body: func(s, v string) map[string]any { return map[string]any{"amount": 12.5, "currency": "EUR"} }},
}

// SharePDF is a share link that waits for its transformation (registered
// with after): the PDF it publishes is the one the grant names. Not among
// Flavours: it is registered only with a dependency.
var SharePDF = Flavour{Action: "share_pdf", Risk: client.RiskIrreversible, Flags: []client.Flag{client.FlagIrreversible},
	Method: http.MethodPost, Path: "/links", FromDependency: "file_ref",
	Body: func(s, v string) map[string]any { return map[string]any{"share": s + " version " + v + " as PDF"} }}

// Registration is what an integration registers for Flavour f on source
// at version. The payload is the request, so a reviewer sees what runs.
func (f Flavour) Registration(source, version string, body map[string]any) client.Registration {
	payload, _ := json.Marshal(map[string]any{"method": f.Method, "path": f.Path, "body": body})
	return client.Registration{SourceRef: source, LogicalVersion: version, Action: f.Action,
		Destination: sandbox.DestinationName, Risk: f.Risk, Flags: f.Flags, Payload: payload}
}

// View is the part of a sandbox answer (a created resource, or a
// job) an integration reads.
type View struct {
	Ref            string `json:"ref"`
	Kind           string `json:"kind"`
	Version        string `json:"version"`
	Status         string `json:"status"`
	OutputRef      string `json:"output_ref"`
	LogicalVersion string `json:"logical_version"`
	// InputVersion is the version of its input a job ran on (the file's
	// version when the job started), which may not be the one it was
	// asked for.
	InputVersion string `json:"input_version"`
}

// Sender returns the send function for op: one request to the sandbox at
// base, with the grant's key, whose metadata names the operation and its
// logical version (what reconciliation searches for). body is the request
// without that metadata; it is the same on every attempt, as a key demands.
func Sender(hc *http.Client, base string, f Flavour, op *client.Operation, body map[string]any) func(ctx context.Context, g *client.Grant) client.Outcome {
	target := base + f.Path
	if f.Method == http.MethodGet {
		target += "?operation_id=" + url.QueryEscape(op.ID)
	}
	// The body is the same on every attempt, as a key demands: what the
	// dependency was confirmed with does not change once it is.
	data := func(g *client.Grant) []byte {
		if f.Method == http.MethodGet {
			return nil
		}
		b := map[string]any{}
		for k, v := range body {
			b[k] = v
		}
		if f.FromDependency != "" && g.After != nil && g.After.Resource != nil {
			b[f.FromDependency] = g.After.Resource.Ref
		}
		b["metadata"] = map[string]any{"operation_id": op.ID, "logical_version": op.LogicalVersion}
		raw, _ := json.Marshal(b)
		return raw
	}
	return func(ctx context.Context, g *client.Grant) client.Outcome {
		req, err := client.NewAttemptRequest(ctx, g, f.Method, target, data(g))
		if err != nil {
			return client.Outcome{Result: client.ResultConnectionError, Phase: client.PhaseBeforeSend}
		}
		resp, o := client.SendAttempt(hc, req)
		if resp == nil {
			return o
		}
		defer resp.Body.Close()
		if o.Result != client.ResultSuccess || f.Method == http.MethodGet {
			return o
		}
		// The effect happened; what it created is a bonus for the ledger
		// (an unreadable body still reports success, without a resource).
		var v View
		if b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err == nil && json.Unmarshal(b, &v) == nil && v.Ref != "" {
			if f.Job {
				o.Job = &client.JobRef{Ref: v.Ref, Status: v.Status}
			} else {
				o.Resource = &client.ResourceRef{Ref: v.Ref, Kind: v.Kind, Version: v.Version}
			}
		}
		return o
	}
}

// DestClient is an integration's HTTP client for the destination: it never
// follows a redirect (an answer, not a second request) and gives up well
// within the attempt lease.
func DestClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second},
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// LookupJob reads a job's status at the sandbox (GET /jobs/{ref}: a probe,
// never faulted).
func LookupJob(ctx context.Context, hc *http.Client, base, ref string) (*View, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/jobs/"+url.PathEscape(ref), nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /jobs/%s: HTTP %d", ref, resp.StatusCode)
	}
	var v View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// FollowJob reports an accepted operation's job to Limbo once the sandbox
// says it ended: succeeded (with its output and the version it was for),
// or canceled. It returns the operation as Limbo then holds it.
func FollowJob(ctx context.Context, c *client.Client, hc *http.Client, base string, op *client.Operation) (*client.Operation, error) {
	if len(op.Jobs) == 0 {
		return c.Get(ctx, op.ID)
	}
	j := op.Jobs[len(op.Jobs)-1]
	v, err := LookupJob(ctx, hc, base, j.Ref)
	if err != nil {
		return nil, err
	}
	switch client.JobStatus(v.Status) {
	case client.JobSucceeded, client.JobCanceled, client.JobFailed:
		return c.PutJob(ctx, op.ID, j.Ref, client.JobUpdate{Status: client.JobStatus(v.Status),
			InputVersion: cmp.Or(v.InputVersion, v.LogicalVersion), OutputRef: v.OutputRef})
	}
	return op, nil
}

// Pause waits d, or until ctx ends; it reports whether the wait completed.
func Pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
