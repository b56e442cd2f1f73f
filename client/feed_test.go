package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/limbo-dev/limbo/client"
)

// feedServer serves decisions d1…dN as the server pages them: size per
// page, next_cursor naming the last one listed ("" until the first), an
// empty page keeping the cursor; fail makes the next request a 503.
type feedServer struct {
	n     atomic.Int32
	size  int
	fail  atomic.Bool
	pages atomic.Int32
}

func (f *feedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.pages.Add(1)
	if r.URL.Path != "/api/v1/decisions" {
		http.NotFound(w, r)
		return
	}
	if f.fail.Swap(false) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	cur := r.URL.Query().Get("cursor")
	after := 0
	if cur != "" {
		after, _ = strconv.Atoi(cur[len("1-"):])
	}
	page := struct {
		Decisions  []client.Decision `json:"decisions"`
		NextCursor string            `json:"next_cursor"`
	}{Decisions: []client.Decision{}, NextCursor: cur}
	for i := after + 1; i <= int(f.n.Load()) && i <= after+f.size; i++ {
		page.Decisions = append(page.Decisions, client.Decision{ID: fmt.Sprintf("d%d", i)})
		page.NextCursor = fmt.Sprintf("1-%d", i)
	}
	_ = json.NewEncoder(w).Encode(page)
}

func ids(t *testing.T, seq func(func(client.Decision, error) bool), stopAfter int) []string {
	t.Helper()
	var out []string
	for d, err := range seq {
		if err != nil {
			out = append(out, "error")
			break
		}
		out = append(out, d.ID)
		if len(out) == stopAfter {
			break
		}
	}
	return out
}

func TestDecisionFeedPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &feedServer{size: 2}
	f.n.Store(5)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "tok")

	if got := ids(t, c.Decisions(ctx, ""), 0); !slices.Equal(got, []string{"d1", "d2", "d3", "d4", "d5"}) {
		t.Errorf("the whole feed: %v", got)
	}
	if got := ids(t, c.Decisions(ctx, "1-3"), 0); !slices.Equal(got, []string{"d4", "d5"}) {
		t.Errorf("from cursor 1-3: %v", got)
	}

	// A loop that breaks off mid-page: the same feed goes on where it
	// stopped; Cursor stays at the start of the unfinished page.
	feed := c.DecisionFeed("")
	if got := ids(t, feed.All(ctx), 3); !slices.Equal(got, []string{"d1", "d2", "d3"}) {
		t.Errorf("first three: %v", got)
	}
	if feed.Cursor() != "1-2" {
		t.Errorf("cursor after d3 (mid-page) = %q, want 1-2 (the page d3 and d4 came in)", feed.Cursor())
	}
	if got := ids(t, c.Decisions(ctx, feed.Cursor()), 0); !slices.Equal(got, []string{"d3", "d4", "d5"}) {
		t.Errorf("resumed from the cursor: %v, want d3 again and none skipped", got)
	}
	if got := ids(t, feed.All(ctx), 0); !slices.Equal(got, []string{"d4", "d5"}) {
		t.Errorf("the same feed, again: %v", got)
	}
	if feed.Cursor() != "1-5" {
		t.Errorf("cursor at the end = %q, want 1-5", feed.Cursor())
	}

	// Nothing new: All ends at once, the cursor kept; decisions that come
	// later are listed by the next All.
	if got := ids(t, feed.All(ctx), 0); len(got) != 0 || feed.Cursor() != "1-5" {
		t.Errorf("at the end: %v, cursor %q", got, feed.Cursor())
	}
	f.n.Store(6)
	if got := ids(t, feed.All(ctx), 0); !slices.Equal(got, []string{"d6"}) || feed.Cursor() != "1-6" {
		t.Errorf("after a new decision: %v, cursor %q", got, feed.Cursor())
	}

	// A failed page ends the sequence with its error, the cursor unchanged.
	f.n.Store(7)
	f.fail.Store(true)
	if got := ids(t, feed.All(ctx), 0); !slices.Equal(got, []string{"error"}) || feed.Cursor() != "1-6" {
		t.Errorf("a failed page: %v, cursor %q", got, feed.Cursor())
	}
	if got := ids(t, feed.All(ctx), 0); !slices.Equal(got, []string{"d7"}) {
		t.Errorf("after the failure: %v", got)
	}
}
