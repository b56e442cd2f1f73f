package undo

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/limbo-dev/limbo/client"
)

// serverOutcome carries every field of the client's outcome: the store
// records what the API would have received as JSON. A field added to the
// outcome without its copy fails here.
func TestServerOutcomeKeepsEveryField(t *testing.T) {
	o := client.Outcome{Result: client.ResultError, Phase: client.PhaseAfterSend, HTTPStatus: 503, RetryAfter: "2",
		ProviderCode: "busy", ProviderRequestID: "req-1", Resource: &client.ResourceRef{Ref: "r", Kind: "k", Version: "v"},
		Job: &client.JobRef{Ref: "j", Status: "queued"}, Cost: 0.5, ShouldRetry: new(true),
		Usage: &client.Usage{Model: "m", PromptTokens: 1, CompletionTokens: 2}, Output: json.RawMessage(`{"a":1}`), OutputInvalid: "why"}
	v := reflect.ValueOf(o)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("fill %s in the test's outcome", v.Type().Field(i).Name)
		}
	}
	want, _ := json.Marshal(o)
	got, _ := json.Marshal(serverOutcome(o))
	if string(got) != string(want) {
		t.Errorf("serverOutcome:\n got %s\nwant %s", got, want)
	}
}
