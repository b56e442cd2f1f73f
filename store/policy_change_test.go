package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestReRegisterAfterAPolicyChange: a server restarted with flags and a
// risk added to an action's policy answers the same registration of an
// operation registered before with that operation (200), as it did before
// the change, and opens no case. It answered 422 payload-mismatch and
// opened a payload_mismatch case on each of them.
func TestReRegisterAfterAPolicyChange(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		url := storetest.URL(t, e)
		open := func(ac review.ActionConfig) *store.Store { return openUnderPolicy(t, url, ac) }
		r := review.Registration{Tenant: "acme", SourceRef: "invoice-7", LogicalVersion: "1", Action: "send", Destination: "mail",
			Payload: []byte(`{"to":"a@example.com"}`), Actor: "test"}
		before := open(review.ActionConfig{})
		op, created, err := before.Register(ctx, r)
		if err != nil || !created {
			t.Fatalf("register: %v, created %v", err, created)
		}
		before.Close()

		after := open(review.ActionConfig{Risk: review.RiskIrreversible, Flags: []review.Flag{review.FlagFinancial}})
		for _, reg := range []func() (*review.Operation, error){
			func() (*review.Operation, error) { got, _, err := after.Register(ctx, r); return got, err },
			func() (*review.Operation, error) {
				out, err := after.RegisterMany(ctx, []review.Registration{r})
				if err != nil {
					return nil, err
				}
				return out[0].Op, out[0].Err
			},
		} {
			got, err := reg()
			if err != nil || got.ID != op.ID || got.Risk != op.Risk || len(got.Flags) != 0 {
				t.Errorf("the same registration after the policy changed: %+v, %v; want %s as it was registered", got, err, op.ID)
			}
		}
		cs, err := after.CasesForOperation(ctx, op.ID)
		if err != nil || len(cs) != 0 {
			t.Errorf("cases opened on %s: %d, %v", op.ID, len(cs), err)
		}
	})
}

// TestRepeatAfterAStricterPolicy: a policy made stricter after an
// operation was registered — a higher risk than the one the caller named,
// tenants narrowed, budgets lowered — refused the repeat of that very
// registration (an integrator retrying a call whose answer it lost, an
// agent resuming), which then never got its operation back: 400 or 403
// for its own operation. The repeat now answers with the operation, as
// any repeat does; a registration that is not that repeat (another
// payload, another key) is refused by the policy as before. Single and
// batch registration; both engines.
func TestRepeatAfterAStricterPolicy(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		ctx := context.Background()
		url := storetest.URL(t, e)
		open := func(ac review.ActionConfig) *store.Store { return openUnderPolicy(t, url, ac) }
		attempts := 5
		r := review.Registration{Tenant: "acme", SourceRef: "invoice-8", LogicalVersion: "1", Action: "send", Destination: "mail",
			Risk: review.RiskCompensableWrite, MaxAttempts: &attempts, Payload: []byte(`{"to":"a@example.com"}`), Actor: "test"}
		before := open(review.ActionConfig{})
		op, created, err := before.Register(ctx, r)
		if err != nil || !created {
			t.Fatalf("register: %v, created %v", err, created)
		}
		before.Close()

		for _, stricter := range []review.ActionConfig{
			{Risk: review.RiskIrreversible},
			{Tenants: []string{"globex"}},
			{MaxAttempts: 2},
		} {
			after := open(stricter)
			got, created, err := after.Register(ctx, r)
			if err != nil || created || got.ID != op.ID {
				t.Errorf("%+v: the same registration again: %+v, created %v, %v; want %s", stricter, got, created, err, op.ID)
			}
			out, err := after.RegisterMany(ctx, []review.Registration{r})
			if err != nil || out[0].Err != nil || out[0].Created || out[0].Op == nil || out[0].Op.ID != op.ID {
				t.Errorf("%+v: the same registration in a batch: %+v, %v; want %s", stricter, out, err, op.ID)
			}
			other := r
			other.Payload = []byte(`{"to":"b@example.com"}`)
			if _, _, err := after.Register(ctx, other); err == nil || !(errors.Is(err, review.ErrInvalid) || errors.Is(err, review.ErrForbidden)) {
				t.Errorf("%+v: another payload under the key: %v, want the policy's refusal", stricter, err)
			}
			fresh := r
			fresh.SourceRef = "invoice-9"
			if _, _, err := after.Register(ctx, fresh); err == nil {
				t.Errorf("%+v: a new registration the policy forbids was taken", stricter)
			}
			after.Close()
		}
	})
}

// openUnderPolicy opens the database at url as a server restarted with ac
// as the policy of action "send" at destination "mail".
func openUnderPolicy(t *testing.T, url string, ac review.ActionConfig) *store.Store {
	t.Helper()
	ctx := context.Background()
	cfg := &review.Config{Destinations: map[string]review.Destination{"mail": {Actions: map[string]review.ActionConfig{"send": ac}}}}
	s, err := store.Open(ctx, url, store.Options{Config: cfg, AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns, Resolve: storetest.Resolver(nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
