package web

import (
	"maps"
	"slices"
	"testing"
)

// TestLabelsTranslated fails for a label, shown through label(), that has
// no Italian: TestCatalogComplete finds keys written as T(ctx, "…") only,
// and a failed job's status was shown in English on an Italian page.
func TestLabelsTranslated(t *testing.T) {
	var all []string
	add := func(vals ...string) { all = append(all, vals...) }
	add(slices.Collect(maps.Values(stateLabels))...)
	add(slices.Collect(maps.Values(riskLabels))...)
	add(slices.Collect(maps.Values(reasonLabels))...)
	add(slices.Collect(maps.Values(actionLabels))...)
	add(slices.Collect(maps.Values(flagLabels))...)
	add(slices.Collect(maps.Values(resultLabels))...)
	add(slices.Collect(maps.Values(phaseLabels))...)
	add(slices.Collect(maps.Values(nextLabels))...)
	add(slices.Collect(maps.Values(sourceLabels))...)
	add(slices.Collect(maps.Values(verdictLabels))...)
	add(slices.Collect(maps.Values(jobStatusLabels))...)
	add(slices.Collect(maps.Values(decisionStatusLabels))...)
	add(slices.Collect(maps.Values(evidenceLabels))...)
	add(slices.Collect(maps.Values(roleLabels))...)
	add(slices.Collect(maps.Values(jobEndLabels))...)
	add(slices.Collect(maps.Values(probeLabels))...)
	for _, v := range all {
		if _, ok := italian[v]; !ok {
			t.Errorf("label %q has no Italian translation (add it to a catalog_it*.go)", v)
		}
	}
}
