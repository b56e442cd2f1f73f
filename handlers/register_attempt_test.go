package handlers_test

import (
	"net/http"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// registerAnswer is a registration's answer with "attempt": true.
type registerAnswer struct {
	review.Operation
	Attempt        *grant `json:"attempt"`
	AttemptProblem *struct {
		Type        string       `json:"type"`
		Status      int          `json:"status"`
		OperationID string       `json:"operation_id"`
		State       review.State `json:"state"`
		RetryAfter  int          `json:"retry_after"`
		RequestID   string       `json:"request_id"`
	} `json:"attempt_problem"`
}

// TestRegisterWithAttempt: "attempt": true makes the attempt cycle two
// calls. A new operation answers 201 with its grant; the same registration
// again asks again, and is told why not (the attempt in flight); a
// concurrency limit is a retry-later in the answer, not a failed
// registration; and the attempt cycle runs on from the grant as from POST
// …/attempts. Every answer is checked against the OpenAPI document by do.
func TestRegisterWithAttempt(t *testing.T) {
	t.Parallel()
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"models": {Concurrency: 1, Lease: review.DefaultLease},
	}}
	storetest.Each(t, func(t *testing.T, engine store.Engine) {
		b := setup(t, engine, cfg)
		body := registration("prompt-1", "models", review.RiskGenerate, `"attempt":true`)
		var first registerAnswer
		res := b.post("/api/v1/operations", body).want(t, http.StatusCreated)
		res.decode(t, &first)
		if first.Attempt == nil || first.Attempt.N != 1 || first.Attempt.OperationID != first.ID || first.AttemptProblem != nil {
			t.Fatalf("201 with attempt: grant %+v, problem %+v", first.Attempt, first.AttemptProblem)
		}
		if loc := res.Header.Get("Location"); loc != "/api/v1/operations/"+first.ID {
			t.Errorf("Location = %q", loc)
		}
		if got := b.get("/api/v1/operations/"+first.ID).want(t, http.StatusOK).op(t); got.State != review.InFlight || len(got.Attempts) != 1 {
			t.Errorf("after the grant: state %s, %d attempts", got.State, len(got.Attempts))
		}

		// The same registration again: 200, and no second attempt while
		// the first is in flight.
		var again registerAnswer
		b.post("/api/v1/operations", body).want(t, http.StatusOK).decode(t, &again)
		if again.ID != first.ID || again.Attempt != nil || again.AttemptProblem == nil ||
			again.AttemptProblem.Type != "not-attemptable" || again.AttemptProblem.State != review.InFlight || again.AttemptProblem.RequestID == "" {
			t.Errorf("again: id %s, grant %+v, problem %+v", again.ID, again.Attempt, again.AttemptProblem)
		}

		// Another operation at the limited destination: registered (201),
		// its attempt to wait.
		var second registerAnswer
		b.post("/api/v1/operations", registration("prompt-2", "models", review.RiskGenerate, `"attempt":true`)).
			want(t, http.StatusCreated).decode(t, &second)
		if second.Attempt != nil || second.AttemptProblem == nil || second.AttemptProblem.Type != "retry-later" ||
			second.AttemptProblem.Status != http.StatusTooManyRequests || second.AttemptProblem.RetryAfter < 1 {
			t.Errorf("limited: grant %+v, problem %+v", second.Attempt, second.AttemptProblem)
		}

		// The cycle goes on from the grant; then the waiting one may start.
		if a := b.outcome(t, first.ID, first.Attempt.N, `{"result":"success","phase":"after_send","http_status":200}`); a.Next != review.NextDone {
			t.Errorf("outcome: next %s", a.Next)
		}
		var retried registerAnswer
		b.post("/api/v1/operations", registration("prompt-2", "models", review.RiskGenerate, `"attempt":true`)).
			want(t, http.StatusOK).decode(t, &retried)
		if retried.Attempt == nil || retried.Attempt.N != 1 {
			t.Errorf("after the slot freed: grant %+v, problem %+v", retried.Attempt, retried.AttemptProblem)
		}

		// Without "attempt" (or with false) the answer is the operation alone.
		plain := b.post("/api/v1/operations", registration("prompt-3", "models", review.RiskGenerate, `"attempt":false`)).
			want(t, http.StatusCreated).op(t)
		if plain.State != review.Pending || plain.AttemptCount != 0 {
			t.Errorf("attempt false: state %s, %d attempts", plain.State, plain.AttemptCount)
		}
		b.post("/api/v1/operations", registration("prompt-4", "models", review.RiskGenerate, `"attempt":"yes"`)).
			want(t, http.StatusBadRequest).problem(t, "invalid-request")
	})
}
