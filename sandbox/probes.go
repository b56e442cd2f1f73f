package sandbox

import (
	"net/http"
	"strconv"
	"time"
)

// Probes are how a reconciler learns the truth. They never lag (except
// search, by design) and answer the truth, unless Options.ProbeErrors
// faults their answer (probefaults.go): a faulted answer says nothing,
// and no probe ever changes anything.

// probeEndpoint answers one probe: a status and the value to render.
type probeEndpoint func(r *http.Request) (int, any)

func (s *Sandbox) getResource(r *http.Request) (int, any) {
	s.mu.Lock()
	res, ok := s.resources[r.PathValue("ref")]
	var v map[string]any
	if ok {
		v = res.view()
	}
	s.mu.Unlock()
	if !ok {
		return http.StatusNotFound, apiError{Error: "not_found"}
	}
	return http.StatusOK, v
}

// jobView is a job as GET /jobs/{ref} shows it.
type jobView struct {
	Ref            string `json:"ref"`
	Status         string `json:"status"`
	OutputRef      string `json:"output_ref,omitempty"`
	OperationID    string `json:"operation_id"`
	LogicalVersion string `json:"logical_version"`
	InputRef       string `json:"input_ref"`
	InputVersion   string `json:"input_version,omitempty"`
	Format         string `json:"format"`
	Compensated    bool   `json:"compensated"`
}

func (s *Sandbox) getJob(r *http.Request) (int, any) {
	s.mu.Lock()
	res, ok := s.resources[r.PathValue("ref")]
	ok = ok && res.job != nil
	var v jobView
	if ok {
		v = jobView{
			Ref: res.ref, Status: res.job.status, OutputRef: res.job.outputRef,
			OperationID: res.operationID, LogicalVersion: res.logicalVersion,
			InputRef: res.job.inputRef, InputVersion: res.job.inputVersion, Format: res.job.format, Compensated: res.compensated,
		}
	}
	s.mu.Unlock()
	if !ok {
		return http.StatusNotFound, apiError{Error: "not_found"}
	}
	return http.StatusOK, v
}

// searchItem is one hit of GET /search.
type searchItem struct {
	Ref            string `json:"ref"`
	Kind           string `json:"kind"`
	Version        string `json:"version"`
	OperationID    string `json:"operation_id"`
	LogicalVersion string `json:"logical_version"`
}

// search lists the resources whose metadata names an operation:
// GET /search?operation_id=X[&kind=K][&include_outputs=true][&limit=N][&cursor=C].
// A resource shows up only SearchLag after its creation, and no longer once
// compensated. Job outputs are left out unless asked for, so that one effect
// is one hit. With limit, at most N hits per page, and "next" names the
// cursor of the page after (the last ref listed: a resource hidden meanwhile
// cannot shift a page); absent on the last page.
func (s *Sandbox) search(r *http.Request) (int, any) {
	q := r.URL.Query()
	opID, kind, cursor := q.Get("operation_id"), q.Get("kind"), q.Get("cursor")
	outputs := q.Get("include_outputs") == "true" || q.Get("include_outputs") == "1"
	if opID == "" {
		return http.StatusBadRequest, apiError{Error: "invalid_request", Detail: "operation_id: required"}
	}
	limit := 0
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return http.StatusBadRequest, apiError{Error: "invalid_request", Detail: "limit: a positive number"}
		}
		limit = n
	}
	items := []searchItem{}
	next := ""
	s.mu.Lock()
	visibleBefore := s.now().Add(-s.opts.SearchLag)
	started := cursor == ""
	for _, res := range s.order {
		if !started {
			started = res.ref == cursor
			continue
		}
		switch {
		case !res.namesOperation(opID), res.compensated, res.createdAt.After(visibleBefore),
			kind != "" && res.kind != kind, res.jobRef != "" && !outputs:
			continue
		}
		if limit > 0 && len(items) == limit {
			next = items[len(items)-1].Ref
			break
		}
		// A file found for an operation that uploaded one of its versions
		// shows that operation, at the file's current version: whether the
		// operation's own version ever existed is its history's to say.
		items = append(items, searchItem{Ref: res.ref, Kind: res.kind, Version: res.logicalVersion, OperationID: opID, LogicalVersion: res.logicalVersion})
	}
	s.mu.Unlock()
	if !started {
		return http.StatusBadRequest, apiError{Error: "invalid_request", Detail: "cursor: unknown"}
	}
	page := map[string]any{"items": items}
	if next != "" {
		page["next"] = next
	}
	return http.StatusOK, page
}

// truthItem is one effect as GET /truth shows it.
type truthItem struct {
	OperationID    string    `json:"operation_id"`
	LogicalVersion string    `json:"logical_version"`
	ResourceRef    string    `json:"resource_ref"`
	Kind           string    `json:"kind"`
	Compensated    bool      `json:"compensated"`
	At             time.Time `json:"at"`
}

func (s *Sandbox) truth(w http.ResponseWriter, _ *http.Request) {
	effects := s.Truth()
	items := make([]truthItem, len(effects))
	for i, e := range effects {
		items[i] = truthItem{OperationID: e.OperationID, LogicalVersion: e.LogicalVersion, ResourceRef: e.ResourceRef, Kind: e.Kind, Compensated: e.Compensated, At: e.At.UTC()}
	}
	writeJSON(w, http.StatusOK, items)
}

// namesOperation: r was created by operation opID, or one of its versions
// was uploaded by it. The caller holds s.mu.
func (r *resource) namesOperation(opID string) bool {
	if r.operationID == opID {
		return true
	}
	for _, v := range r.versions {
		if v.OperationID == opID {
			return true
		}
	}
	return false
}
