package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limbo-dev/limbo/review"
)

// sampleArgs are arguments for format's verbs that no format writes: a
// number for %d, a ref for %s.
func sampleArgs(format string) []any {
	var args []any
	for i, v := range formatVerb.FindAllString(format, -1) {
		if v == "%d" {
			args = append(args, 7+i)
		} else {
			args = append(args, fmt.Sprintf("ref-%d", i))
		}
	}
	return args
}

// TestReasonFormats: every reason review writes has Italian, and the text
// it writes reads back as that format's Italian, whole: no other format
// takes it first, and its arguments stay where they stand. English reads
// back as stored, but for the formats worded again around labels
// (english).
func TestReasonFormats(t *testing.T) {
	it, en := WithLang(context.Background(), "it"), context.Background()
	for _, f := range review.WhyFormats() {
		if _, ok := italian[f]; !ok {
			t.Errorf("%q has no Italian", f)
			continue
		}
		args := sampleArgs(f)
		stored := fmt.Sprintf(f, args...)
		want := T(it, f)
		if len(args) > 0 {
			want = Tf(it, f, inLang(it, f, args)...)
		}
		if got := Reason(it, stored); got != want {
			t.Errorf("Reason(it, %q) = %q, want %q", stored, got, want)
		}
		want = stored
		if w, ok := english[f]; ok {
			want = fmt.Sprintf(w, inLang(en, f, args)...)
		}
		if got := Reason(en, stored); got != want {
			t.Errorf("Reason(en, %q) = %q, want %q", stored, got, want)
		}
	}
}

// inLang is format's sample arguments as the console words them: a
// version as "version ref-1" (argVersion), any other as written.
func inLang(ctx context.Context, format string, args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
		if s, ok := a.(string); ok {
			out[i] = argInLang(ctx, format, i, s)
		}
	}
	return out
}

// TestReasonInEnglish: a code review writes into a reason reads as its
// label in English too, in a sentence worded for it; a time as the pages
// write one.
func TestReasonInEnglish(t *testing.T) {
	en := context.Background()
	for stored, want := range map[string]string{
		fmt.Sprintf(review.WhyAfterSend, review.ResultTimeout) + "; " + fmt.Sprintf(review.WhyNeverRepeated, review.RiskCompensableWrite): "timed out after the request was sent: outcome unknown; Write that can be undone: never repeated before reconciliation",
		fmt.Sprintf(review.WhyDependencyWaiting, "op_1", review.NeedsReview):                                                              "waiting for dependency op_1 to be confirmed (state: Needs review)",
		fmt.Sprintf(review.WhyJobEnded, "job-1", review.JobCanceled):                                                                      "job job-1 ended: it was canceled",
		fmt.Sprintf(review.WhyNoJobLeft, "job-2", review.JobFailed, 2):                                                                    "job job-2 ended (it failed): none of the operation's 2 jobs is still running, and none made an output",
		fmt.Sprintf(review.WhyFoundCandidates, review.ProbeSearch, 2):                                                                     "the search found 2 candidates",
		fmt.Sprintf(review.WhyProbeFailedClass, review.ProbeStatus, "timeout", "no answer"):                                               "the status lookup failed (timeout): no answer",
		fmt.Sprintf(review.WhyApproverRole, "support"):                                                                                    "the approver's role (Support) no longer decides this case",
		fmt.Sprintf(review.WhyRetryAt, "2026-12-04T10:00:00Z"):                                                                            fmt.Sprintf(review.WhyRetryAt, FormatTime(en, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))),
		"a person's words, as written":                                                                                                    "a person's words, as written",
	} {
		if got := Reason(en, stored); got != want {
			t.Errorf("Reason(en, %q)\n = %q\nwant %q", stored, got, want)
		}
	}
}

// TestReasonInItalian: a stored reason is read back clause by clause; a
// reason quoted in another is read back too; a clause no format wrote (an
// older version's, a person's words) stays as stored, and so does an
// empty reason.
func TestReasonInItalian(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, c := range reasonCases() {
		if got := Reason(it, c.stored); got != c.want {
			t.Errorf("Reason(it, %q)\n = %q\nwant %q", c.stored, got, c.want)
		}
		if strings.Contains(c.want, "%!") {
			t.Errorf("%q: a verb left unfilled", c.want)
		}
	}
	if got := Reason(it, ""); got != "" {
		t.Errorf("an empty reason: %q", got)
	}
}

type reasonCase struct{ stored, want string }

// reasonCases are reasons as review composes them, with their Italian.
func reasonCases() []reasonCase {
	it := WithLang(context.Background(), "it")
	tf := func(f string, args ...any) string { return Tf(it, f, args...) }
	at := "2026-12-04T10:00:00Z"
	return []reasonCase{
		{ // a classification, then a retry
			fmt.Sprintf(review.WhyHTTPNotProcessed, 503) + "; " + fmt.Sprintf(review.WhyRetryAt, at),
			"HTTP 503: richiesta non elaborata; nuovo tentativo non prima del 4 dic 2026, 10:00 UTC"},
		{ // a %s first: the first clause is not taken in by the second
			fmt.Sprintf(review.WhyHTTPAfterSend, 502) + "; " + fmt.Sprintf(review.WhyNeverRepeated, "compensable_write"),
			"HTTP 502 dopo l'invio: esito ambiguo; Scrittura compensabile: mai ripetuta prima della riconciliazione"},
		{ // a weighing of two clauses quoted after "but"; a %s last takes in no clause after it
			fmt.Sprintf(review.WhyHTTPNotProcessed, 429) + "; " + fmt.Sprintf(review.WhyRetryAt, at) + "; " +
				fmt.Sprintf(review.WhyButEvidence, fmt.Sprintf(review.WhyEvidenceNamesJob, "job-7")),
			tf(review.WhyHTTPNotProcessed, 429) + "; " + tf(review.WhyRetryAt, "4 dic 2026, 10:00 UTC") + "; " +
				tf(review.WhyButEvidence, tf(review.WhyEvidenceNamesJob, "job-7"))},
		{ // a dependency's reason quoted in this one's
			fmt.Sprintf(review.WhyDependencyFailed, "op_1", fmt.Sprintf(review.WhyHTTPRejected, 404)),
			tf(review.WhyDependencyFailed, "op_1", tf(review.WhyHTTPRejected, 404))},
		{ // a clause no format wrote, kept; the next read back
			"something an older version wrote; " + review.WhyDeadlineWhileWaiting,
			"something an older version wrote; " + T(it, review.WhyDeadlineWhileWaiting)},
		{ // what a late report said, as review.LateEvidence writes it
			review.LateEvidence(&review.Operation{ID: "op_1", LogicalVersion: "v1"}, 2, review.Outcome{Result: review.ResultSuccess,
				HTTPStatus: 200, Resource: &review.ResourceRef{Ref: "r1"}, Job: &review.JobRef{Ref: "j1"}}, review.WhyLateAfterClosed).Note,
			"segnalazione tardiva per il tentativo 2 dopo la sua chiusura: riuscito (HTTP 200), risorsa r1, job j1"},
		{ // without an HTTP status or job
			review.LateEvidence(&review.Operation{ID: "op_1"}, 1, review.Outcome{Result: review.ResultSuccess,
				Resource: &review.ResourceRef{Ref: "a.pdf"}}, review.WhyLateAfterMovedOn).Note,
			"segnalazione tardiva per il tentativo 1 dopo che l'operazione è andata avanti: riuscito, risorsa a.pdf"},
		{ // a person's words with "; " in them stay theirs
			fmt.Sprintf(review.WhyDecidedConfirm, "ann@example.com", "checked; the file is there"),
			tf(review.WhyDecidedConfirm, "ann@example.com", "checked") + "; the file is there"},
	}
}

// BenchmarkReasonInItalian reads back each of reasonCases in Italian, as
// an Italian operation page does for each state reason, next step and
// evidence note it shows. English pays nothing: it shows what is stored.
func BenchmarkReasonInItalian(b *testing.B) {
	it := WithLang(context.Background(), "it")
	cases := reasonCases()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Reason(it, cases[i%len(cases)].stored)
	}
}

// TestReasonCodesInItalian: the codes and times review writes into its
// reasons are shown in Italian as the pages label them elsewhere, never as
// the code: a risk, an escalation reason, an attempt's result, a state, a
// decision, a time. A ref in the same place stays as written.
func TestReasonCodesInItalian(t *testing.T) {
	it := WithLang(context.Background(), "it")
	for _, c := range []struct{ stored, want, code string }{
		{fmt.Sprintf(review.WhyNeverRepeated, review.RiskCompensableWrite), "Scrittura compensabile: mai ripetuta prima della riconciliazione", "compensable_write"},
		{fmt.Sprintf(review.WhyKeyGuaranteeNotCovered, review.RiskCompensableWrite), "Scrittura compensabile: la garanzia", "compensable_write"},
		{fmt.Sprintf(review.WhyPolicyEscalates, review.ReasonBudgetExhausted), "la policy dell'azione affida a una persona i casi “Tentativi esauriti”", "budget_exhausted"},
		{fmt.Sprintf(review.WhyBeforeSend, review.ResultConnectionError), "errore di connessione prima dell'invio", "connection_error"},
		{fmt.Sprintf(review.WhyAfterSend, review.ResultTimeout), "tempo scaduto dopo l'invio della richiesta", "timeout"},
		{fmt.Sprintf(review.WhyLateAfterOutcome, review.ResultTimeout), "dopo il suo esito “tempo scaduto”", "timeout"},
		{fmt.Sprintf(review.WhyDependencyWaiting, "op_1", review.RetryWait), "in attesa che la dipendenza op_1 sia confermata (stato: ", "retry_wait"},
		{fmt.Sprintf(review.WhyLateSuccessAnotherAttempt, 1, 2, review.Ambiguous), "anche il tentativo 2 (", "ambiguous"},
		{fmt.Sprintf(review.WhyCompensationCanceled, "ann@example.com", review.DecideCompensationDone), "annullata: ann@example.com ha indicato", "compensation_done"},
		{fmt.Sprintf(review.WhyUndoByHand, "fld-2", "op_1, "+review.AnotherTenantsOperation), "fld-2 è stata scritta anche da op_1, un'operazione di un altro tenant,", review.AnotherTenantsOperation},
		{fmt.Sprintf(review.WhyRetryAt, "2026-12-04T10:00:00.123456Z"), "nuovo tentativo non prima del 4 dic 2026, 10:00 UTC", "2026-12-04T"},
		{fmt.Sprintf(review.WhyFailedOnlyIfNothingShows, "2026-12-04T10:00:00Z"), "finestra di conferma, il 4 dic 2026, 10:00 UTC", "2026-12-04T"},
		{fmt.Sprintf(review.WhyJobEnded, "job-1", review.JobFailed), "il job job-1 è terminato: non è riuscito", "failed"},
		{fmt.Sprintf(review.WhyJobEndedAfterRetry, "job-1", review.JobCanceled, 2), "il job job-1 è terminato (è stato annullato), ma", "canceled"},
		{fmt.Sprintf(review.WhyJobEndedBesideLive, "job-2", review.JobFailed, "job-1"), "il job job-2 è terminato (non è riuscito), ma il job job-1", "failed"},
		{fmt.Sprintf(review.WhyNoJobLeft, "job-2", review.JobFailed, 2), "il job job-2 è terminato (non è riuscito): nessuno dei 2 job", "failed"},
		{fmt.Sprintf(review.WhyFoundCandidates, review.ProbeSearch, 2), "la ricerca ha trovato 2 candidati", "search"},
		{fmt.Sprintf(review.WhyFoundOneCandidate, review.ProbeStatus), "la verifica dello stato ha trovato 1 candidato", "status"},
		{fmt.Sprintf(review.WhyConfirmWindowFound, review.ProbeHistory, 3), "la consultazione della cronologia ha trovato 3 candidati", "history"},
		{fmt.Sprintf(review.WhyProbeFailed, review.ProbeSearch, "HTTP 503"), "la ricerca è fallita: HTTP 503", "search"},
		{fmt.Sprintf(review.WhyProbeFailedClass, review.ProbeStatus, "credential", "credential X is not set"), "la verifica dello stato è fallita (credenziale non impostata): ", "(credential)"},
		{fmt.Sprintf(review.WhyAnswerClash, review.ProbeStatus, "r1"), "la risposta della verifica dello stato elenca r1", "status"},
		{fmt.Sprintf(review.WhyAnonymousCandidate, review.ProbeSearch, "r1"), "la ricerca ha trovato r1, che", "search"},
		{fmt.Sprintf(review.WhyApproverRole, "support"), "il ruolo di chi ha approvato (Supporto)", "support"},
	} {
		got := Reason(it, c.stored)
		if !strings.Contains(got, c.want) || strings.Contains(got, c.code) {
			t.Errorf("Reason(it, %q)\n = %q\nwant it to hold %q, not the code %q", c.stored, got, c.want, c.code)
		}
	}
	// Not a code of the kind its place holds: as written.
	if got := Reason(it, fmt.Sprintf(review.WhyNeverRepeated, "ref-1")); got != "ref-1: mai ripetuta prima della riconciliazione" {
		t.Errorf("an unknown risk: %q", got)
	}
}

// TestNothingGivenReadsAsWords: where the record holds no value (a
// dependency's version or reason, a history entry's version or writer),
// review writes review.NotGiven; the console words it for its place in
// either language, and reads a history's note back whole, what it means
// too.
func TestNothingGivenReadsAsWords(t *testing.T) {
	op := &review.Operation{ID: "op-a", LogicalVersion: "7"}
	found := []review.Candidate{{Ref: "file-1", Kind: "file", Version: "8", OperationID: "op-a"}}
	hist := func(entries ...review.Candidate) string {
		ev, _ := review.HistoryEvidence(op, review.ProbeResult{Kind: review.ProbeHistory, Ref: "file-1", Candidates: entries}, found)
		return ev.Note
	}
	bare := review.Candidate{Ref: "file-1@1"}
	mine := review.Candidate{Ref: "file-1@2", Version: "7", OperationID: "op-a"}
	dep := func(state review.State, resource *review.ResourceRef) string {
		_, why := review.DependencyReady(review.Dependency{OperationID: "op-d", ResourceVersion: "2"}, &review.Operation{ID: "op-d", State: state, Resource: resource})
		return why
	}
	for _, c := range []struct{ stored, en, it string }{
		{hist(bare), "history of file-1: file-1@1: no version by no known operation — no version by this operation",
			"cronologia di file-1: file-1@1: nessuna versione di nessuna operazione nota — nessuna versione di questa operazione"},
		{hist(bare, mine), "history of file-1: file-1@1: no version by no known operation; file-1@2: version 7 by op-a — this operation's version 7 existed: a later version replaced it",
			"cronologia di file-1: file-1@1: nessuna versione di nessuna operazione nota; file-1@2: versione 7 di op-a — la versione 7 di questa operazione esisteva: una versione successiva l'ha sostituita"},
		{hist(), "history of file-1: no versions — no version by this operation",
			"cronologia di file-1: nessuna versione — nessuna versione di questa operazione"},
		{dep(review.Failed, nil), "dependency op-d failed: no reason recorded", "la dipendenza op-d è fallita: nessun motivo registrato"},
		{dep(review.Compensated, nil), "dependency op-d compensated: no reason recorded", "la dipendenza op-d è stata compensata: nessun motivo registrato"},
		{dep(review.Confirmed, &review.ResourceRef{Ref: "r1"}), "dependency op-d was confirmed without a version, not for version 2",
			"la dipendenza op-d è stata confermata senza versione, non per la versione 2"},
		{dep(review.Confirmed, &review.ResourceRef{Ref: "r1", Version: "1"}), "dependency op-d was confirmed for version 1, not for version 2",
			"la dipendenza op-d è stata confermata per la versione 1, non per la versione 2"},
	} {
		if got := Reason(context.Background(), c.stored); got != c.en {
			t.Errorf("Reason(en, %q)\n = %q\nwant %q", c.stored, got, c.en)
		}
		if got := Reason(WithLang(context.Background(), "it"), c.stored); got != c.it {
			t.Errorf("Reason(it, %q)\n = %q\nwant %q", c.stored, got, c.it)
		}
	}
}
