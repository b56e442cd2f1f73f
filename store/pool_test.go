package store_test

import (
	"context"
	"testing"

	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// TestMaxConns: Options.MaxConns bounds the pool, open and idle; zero keeps
// the defaults (PostgreSQL 32, SQLite 8).
func TestMaxConns(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, e store.Engine) {
		def := store.DefaultMaxConnsSQLite
		if e == store.Postgres {
			def = store.DefaultMaxConnsPostgres
		}
		for _, c := range []struct{ opt, want int }{{0, def}, {3, 3}} {
			s, err := store.Open(context.Background(), storetest.URL(t, e), store.Options{MaxConns: c.opt})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.DB().Stats().MaxOpenConnections; got != c.want {
				t.Errorf("MaxConns %d: the pool opens up to %d connections, want %d", c.opt, got, c.want)
			}
			s.Close()
		}
		if _, err := store.Open(context.Background(), storetest.URL(t, e), store.Options{MaxConns: -1}); err == nil {
			t.Errorf("MaxConns -1: Open succeeded, want an error")
		}
	})
}
