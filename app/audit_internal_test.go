package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/limbo-dev/limbo/anchor"
	"github.com/limbo-dev/limbo/auditkey"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestHandoverChecksTheAnchors: a handover to a key the anchor directory
// shows signing the trail before is refused: the database's checkpoints,
// which name another key now, were rewritten (rows deleted and re-signed),
// and the anchors, outside the database, still say so.
func TestHandoverChecksTheAnchors(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, store.SQLite, store.Options{})
	if _, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-1", LogicalVersion: "1", Action: "render",
		Destination: "files", Risk: review.RiskIdempotentWrite, Payload: []byte(`{}`), Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	storetest.Sealed(t, st)
	dir := t.TempDir()
	w, err := anchor.NewWriter(dir, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	w.CatchUp(ctx)
	signer := auditkey.ID(storetest.AuditKey)
	if err := anchoredBy(dir, signer); !errors.Is(err, store.ErrKeySignedBefore) {
		t.Errorf("a handover to the key the anchors show: %v, want ErrKeySignedBefore", err)
	}
	if err := anchoredBy(dir, "0123456789abcdef"); err != nil {
		t.Errorf("a handover to a new key: %v", err)
	}
	if err := anchoredBy("", signer); err != nil {
		t.Errorf("without an anchor directory: %v", err)
	}
}
