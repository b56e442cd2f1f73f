package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/limbo-dev/limbo/handlers"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// exampleServer is a real Limbo for the examples: the API on 127.0.0.1
// over a fresh SQLite database, with destination "files" (deduplicates by
// Idempotency-Key) and "mail", whose send_email waits for a reviewer's
// approval. Examples have no *testing.T, hence store.Open here.
type exampleServer struct {
	URL, Token string
	store      *store.Store
	close      func()
}

func startLimbo() *exampleServer {
	cfg := &review.Config{Destinations: map[string]review.Destination{
		"files": {HonoursKeys: true, Lease: 30 * time.Second},
		"mail": {Lease: 30 * time.Second, Actions: map[string]review.ActionConfig{
			"send_email": {RequiresApproval: true, ApprovalTimeout: time.Hour}}},
	}}
	dir, err := os.MkdirTemp("", "limbo-example-")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "limbo.db"), store.Options{Config: cfg,
		Resolve: storetest.Resolver(nil), AuditKey: storetest.AuditKey, MaxConns: storetest.MaxConns})
	if err == nil {
		err = st.Migrate(ctx)
	}
	if err != nil {
		panic(err)
	}
	tok, err := st.CreateToken(ctx, review.Operator("owner@example.com"), "acme", "billing")
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(handlers.NewServer(handlers.New(st, nil)))
	return &exampleServer{URL: srv.URL, Token: tok, store: st, close: func() {
		srv.Close()
		st.Close()
		os.RemoveAll(dir)
	}}
}

func (s *exampleServer) Close() { s.close() }

// approve is a reviewer approving the operation's case in the console.
func (s *exampleServer) approve(opID string) {
	ctx := context.Background()
	cs, err := s.store.CasesForOperation(ctx, opID)
	if err != nil || len(cs) != 1 {
		panic(fmt.Sprint("cases: ", cs, err))
	}
	if _, err := s.store.Decide(ctx, store.DecisionRequest{CaseID: cs[0].ID, Action: review.DecideApprove,
		Actor: "reviewer@example.com", Reason: "the recipient asked for it"}); err != nil {
		panic(err)
	}
}
