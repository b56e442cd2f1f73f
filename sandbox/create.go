package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// decode reads a JSON object into v and normalises its metadata: a
// non-string operation_id is refused; a numeric logical_version becomes its
// decimal text. Unknown fields are ignored, as real APIs mostly do.
func decode(body []byte, v any, md *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("body: trailing data after the JSON object")
	}
	if *md == nil {
		*md = map[string]any{}
	}
	m := *md
	if id, ok := m["operation_id"]; ok {
		if _, isString := id.(string); !isString {
			return errors.New("metadata.operation_id: want a string")
		}
	}
	switch lv := m["logical_version"].(type) {
	case nil, string:
	case json.Number:
		m["logical_version"] = lv.String()
	default:
		return errors.New("metadata.logical_version: want a string or a number")
	}
	return nil
}

// create stores one resource with its effect and answers 201.
func (s *Sandbox) create(kind string, md, attrs map[string]any) answer {
	s.mu.Lock()
	v := s.add(kind, md, attrs, "").view()
	s.mu.Unlock()
	return answerJSON(http.StatusCreated, v, true)
}

func (s *Sandbox) createFolder(_ *http.Request, body []byte) answer {
	var req struct {
		Name     string         `json:"name"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.Name == "" {
		return invalid("name: required")
	}
	return s.create(KindFolder, req.Metadata, map[string]any{"name": req.Name})
}

func (s *Sandbox) createFile(_ *http.Request, body []byte) answer {
	var req struct {
		Name      string         `json:"name"`
		FolderRef string         `json:"folder_ref"`
		Content   string         `json:"content"`
		Metadata  map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.Name == "" {
		return invalid("name: required")
	}
	attrs := map[string]any{"name": req.Name, "size": len(req.Content)}
	if req.FolderRef != "" {
		attrs["folder_ref"] = req.FolderRef
	}
	return s.create(KindFile, req.Metadata, attrs)
}

func (s *Sandbox) createJob(_ *http.Request, body []byte) answer {
	var req struct {
		InputRef string         `json:"input_ref"`
		Format   string         `json:"format"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.InputRef == "" || req.Format == "" {
		return invalid("input_ref and format: required")
	}
	s.mu.Lock()
	r := s.add(KindJob, req.Metadata, map[string]any{"input_ref": req.InputRef, "format": req.Format}, "")
	r.job = &job{status: JobQueued, inputRef: req.InputRef, format: req.Format}
	if in, ok := s.resources[req.InputRef]; ok {
		r.job.inputVersion = in.logicalVersion
		r.attrs["input_version"] = in.logicalVersion
	}
	if !s.closed {
		s.wg.Go(func() { s.runJob(r.ref) })
	}
	v := r.view()
	s.mu.Unlock()
	return answerJSON(http.StatusAccepted, v, true)
}

func (s *Sandbox) createLink(_ *http.Request, body []byte) answer {
	var req struct {
		FileRef  string         `json:"file_ref"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.FileRef == "" {
		return invalid("file_ref: required")
	}
	return s.create(KindLink, req.Metadata, map[string]any{"file_ref": req.FileRef})
}

func (s *Sandbox) createEmail(_ *http.Request, body []byte) answer {
	var req struct {
		To       string         `json:"to"`
		Subject  string         `json:"subject"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.To == "" || req.Subject == "" {
		return invalid("to and subject: required")
	}
	return s.create(KindEmail, req.Metadata, map[string]any{"to": req.To, "subject": req.Subject})
}

func (s *Sandbox) createCharge(_ *http.Request, body []byte) answer {
	var req struct {
		Amount   json.Number    `json:"amount"`
		Currency string         `json:"currency"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if amount, err := strconv.ParseFloat(req.Amount.String(), 64); err != nil || amount <= 0 {
		return invalid("amount: want a positive number")
	}
	if len(req.Currency) != 3 {
		return invalid("currency: want a three-letter code")
	}
	return s.create(KindCharge, req.Metadata, map[string]any{"amount": req.Amount, "currency": req.Currency})
}

// compensate undoes a resource: DELETE /resources/{ref}. Undoing twice is
// fine; a queued job is canceled, a finished job's output goes with it.
func (s *Sandbox) compensate(r *http.Request, _ []byte) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.resources[r.PathValue("ref")]
	if !ok {
		return answerJSON(http.StatusNotFound, apiError{Error: "not_found"}, false)
	}
	s.markCompensated(res)
	if j := res.job; j != nil {
		if j.status == JobQueued {
			j.status = JobCanceled
		}
		if out, ok := s.resources[j.outputRef]; ok {
			s.markCompensated(out)
		}
	}
	return answer{status: http.StatusNoContent, committed: true}
}

// markCompensated flags r and its effect — a file's with every version
// uploaded to it, which go with it. The caller holds s.mu.
func (s *Sandbox) markCompensated(r *resource) {
	r.compensated = true
	if r.effect >= 0 {
		s.effects[r.effect].Compensated = true
	}
	for _, v := range r.versions {
		if v.effect >= 0 {
			s.effects[v.effect].Compensated = true
		}
	}
}
