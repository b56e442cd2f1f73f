package metrics_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limbo-dev/limbo/loop"
	"github.com/limbo-dev/limbo/metrics"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/store"
	"github.com/limbo-dev/limbo/store/storetest"
)

// exposedNames are the metric names a real instance exposes, histogram
// series (_bucket, _count, _sum) included, with one observation in every
// vector and one attempt in the retry window (the budget is per tenant
// that attempted) so none is missing for want of traffic.
func exposedNames(t *testing.T) map[string]bool {
	ctx := context.Background()
	st := storetest.Open(t, store.SQLite, store.Options{Config: approvalConfig()})
	op, _, err := st.Register(ctx, review.Registration{Tenant: "acme", SourceRef: "doc-1", LogicalVersion: "1",
		Action: "render", Destination: "files", Risk: review.RiskCompensableWrite, Payload: []byte(`{}`), Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.StartAttempt(ctx, store.AttemptRequest{Tenant: "acme", OperationID: op.ID, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(st, nil)
	t.Cleanup(func() { m.Close() })
	loops := loop.NewStatuses()
	ctx, stop := context.WithCancel(loop.WithStatus(ctx, loops.For("audit-seal")))
	stop()
	loop.Every(ctx, time.Hour, nil, "audit-seal", nil) // started, and ended at once
	m.WatchLoops(loops)
	m.WatchAnchors(func() int64 { return 0 })
	m.ProbeSeconds.WithLabelValues("files", "search").Observe(0.1)
	m.AmbiguousSeconds.WithLabelValues("files").Observe(1)
	m.HTTPSeconds.WithLabelValues("/x", "GET", "2xx").Observe(0.01)
	m.ObserveOutcome(review.NextDone, "files")
	names := map[string]bool{}
	for _, line := range strings.Split(scrape(t, m), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[f[2]+s] = true
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`limbo_[a-z_]+`)

// checkExprs fails on any limbo_ name in exprs that no instance exposes:
// a renamed metric breaks the dashboard or an alert here, not in
// production.
func checkExprs(t *testing.T, file string, exprs []string, names map[string]bool) {
	t.Helper()
	if len(exprs) == 0 {
		t.Fatalf("%s: no expression found", file)
	}
	for _, e := range exprs {
		used := metricName.FindAllString(e, -1)
		if len(used) == 0 {
			t.Errorf("%s: expression %q uses no Limbo metric", file, e)
		}
		for _, n := range used {
			if !names[n] {
				t.Errorf("%s: %q uses %s, which Limbo does not expose", file, e, n)
			}
		}
	}
}

// TestDocsUseRealMetrics: every metric the Grafana dashboard and the
// alert rules in docs/ query exists in a real exposition; promtool, when
// installed, accepts the rules.
func TestDocsUseRealMetrics(t *testing.T) {
	names := exposedNames(t)

	const rulesFile = "../docs/prometheus-alerts.yaml"
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("%s: a rule without alert or expr: %+v", rulesFile, r)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	checkExprs(t, rulesFile, exprs, names)

	const dashFile = "../docs/grafana-limbo.json"
	if raw, err = os.ReadFile(dashFile); err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashFile, err)
	}
	exprs = nil
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q queries nothing", dashFile, p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	checkExprs(t, dashFile, exprs, names)

	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool not installed: the rules' PromQL is not checked")
	}
}

// TestReadmeNamesEveryMetric: every limbo_ metric an instance exposes is
// named in the README (or a page of docs/), where operators look for what
// /metrics holds.
func TestReadmeNamesEveryMetric(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var readme string
	for _, p := range append(pages, "../README.md") {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		readme += string(raw)
	}
	for name := range exposedNames(t) {
		for _, s := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, s); ok && strings.HasSuffix(base, "_seconds") {
				name = base
			}
		}
		if strings.HasPrefix(name, "limbo_") && !strings.Contains(readme, "`"+name+"`") {
			t.Errorf("README.md does not name %s", name)
		}
	}
}
