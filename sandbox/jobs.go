package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/limbo-dev/limbo/webhook"
)

// webhookAttempts is how often a job.completed event is offered before the
// sandbox gives up: best effort, like most providers' first few tries.
const webhookAttempts = 4

// jobEvent is the body of a job.completed webhook.
type jobEvent struct {
	Type           string `json:"type"`
	JobRef         string `json:"job_ref"`
	Status         string `json:"status"`
	OutputRef      string `json:"output_ref"`
	OperationID    string `json:"operation_id"`
	LogicalVersion string `json:"logical_version"`
}

// runJob finishes a job after JobDuration, unless the sandbox closes first,
// and announces it.
func (s *Sandbox) runJob(ref string) {
	if !sleep(s.ctx, s.opts.JobDuration) {
		return
	}
	ev, ok := s.completeJob(ref)
	if ok && s.opts.WebhookURL != "" {
		s.deliver(ev)
	}
}

// completeJob ends a queued job: succeeded, with an output file whose
// metadata names the job's operation and logical version, or — a share
// Options.JobFailures of them — failed, with none, its effect no effect.
func (s *Sandbox) completeJob(ref string) (jobEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.resources[ref]
	if r == nil || r.job == nil || r.job.status != JobQueued {
		return jobEvent{}, false // canceled by a compensation
	}
	ev := jobEvent{Type: "job.completed", JobRef: r.ref, OperationID: r.operationID, LogicalVersion: r.logicalVersion}
	if s.opts.JobFailures > 0 && s.jobRng.Float64() < s.opts.JobFailures {
		r.job.status, ev.Status = JobFailed, JobFailed
		s.effects[r.effect].Failed = true
		return ev, true
	}
	md := map[string]any{"operation_id": r.operationID, "logical_version": r.logicalVersion, "job_ref": r.ref}
	name := fmt.Sprintf("%s.%s", r.job.inputRef, r.job.format)
	out := s.add(KindFile, md, map[string]any{"name": name, "job_ref": r.ref}, r.ref)
	r.job.status, r.job.outputRef = JobSucceeded, out.ref
	ev.Status, ev.OutputRef = JobSucceeded, out.ref
	return ev, true
}

// deliver POSTs a signed event to the webhook URL, retrying a few times with
// the same event id (receivers deduplicate by it) and a fresh signature.
func (s *Sandbox) deliver(ev jobEvent) {
	body, err := json.Marshal(ev)
	if err != nil {
		return
	}
	id := "msg_" + rand.Text()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.post(id, body)
		if err == nil {
			return
		}
		if attempt == webhookAttempts || !sleep(s.ctx, backoff) {
			s.log.Warn("sandbox: webhook not delivered", "job_ref", ev.JobRef, "event_id", id, "attempts", attempt, "err", err)
			return
		}
		backoff *= 2
	}
}

func (s *Sandbox) post(id string, body []byte) error {
	h, err := webhook.Headers(s.opts.WebhookSecret, id, s.now(), body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.opts.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
