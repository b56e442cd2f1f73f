package web

import "github.com/limbo-dev/limbo/review"

// The Italian of the recommendations' rationales (review/rationale.go).
func init() {
	addItalian(map[string]string{
		review.RationaleApproval:            "la policy dell'azione chiede un'approvazione prima dell'esecuzione: leggi il payload, poi approva o rifiuta",
		review.RationaleDuplicates:          "%d risorse indicano questa operazione e versione: tieni %s, compensa %s",
		review.RationaleOneResource:         "una sola risorsa, %s, indica questa operazione e la versione %s",
		review.RationaleOtherVersion:        "%s è un risultato per una versione logica diversa da %s; annullalo prima di ritentare",
		review.RationaleDisagree:            "le fonti autorevoli non concordano; interroga di nuovo la destinazione prima di decidere",
		review.RationaleSpent:               "la destinazione non contiene alcun effetto e il budget o la scadenza sono esauriti",
		review.RationaleSafeRetry:           "la destinazione attesta che non c'è alcun effetto; un nuovo tentativo con la stessa chiave è sicuro",
		review.RationalePayloadReused:       "la chiave è stata riusata con un payload diverso; verifica quale payload è quello voluto: una nuova versione richiede una nuova chiave",
		review.RationaleRefusedPayload:      "la chiave è stata riusata con un payload diverso, che con essa non viene eseguito; fallo fallire per dirlo — se è quello voluto, registralo come nuova versione, con una nuova chiave",
		review.RationaleDeadlinePassed:      "la scadenza è passata con l'esito ancora ambiguo; cerca ancora una volta nella destinazione, poi segna come fallita o conferma",
		review.RationaleNoEvidence:          "nessuna evidenza risolve ancora l'esito; interroga di nuovo la destinazione",
		review.RationaleDependencyBroken:    "l'operazione che questa attende non può più essere ciò che le serve, e nessun tentativo è stato inviato: non c'è nulla da confermare o compensare",
		review.RationaleEffectOnFailed:      "la destinazione riporta %s per questa operazione, che è fallita: all'integratore è stato detto che non è avvenuta; annulla la risorsa (compensa), o di' che è già annullata",
		review.RationaleEffectOnCompensated: "la destinazione riporta %s per questa operazione dopo che il suo effetto è stato annullato: un effetto in più; annulla la risorsa (compensa), o di' che è già annullata",
		review.RationaleClaimedDuplicate:    "un webhook firmato della destinazione riporta %s per questa operazione oltre alla %s confermata: un duplicato, se esiste; verifica presso la destinazione, poi annullalo (compensa) o di' che è già annullato (compensation_done) — oppure, se non c'è nulla, indicalo",
		review.RationaleUnnamedEffect:       "la destinazione ha riportato un successo per questa operazione, che è fallita, senza dire cosa ha creato: cerca l'effetto presso la destinazione, annullalo, poi indicalo (compensation_done) — oppure indicalo se non c'è nulla",
		review.RationaleUndoUnderWay:        "la compensazione di %s è in corso: il suo esito decide; attendilo invece di decidere di nuovo",
		review.RationaleJobUnfinished:       "il job %s non risulta terminato e può ancora produrre l'effetto: quando riesce, conferma il suo output; quando fallisce, segna come fallita o ritenta — un nuovo tentativo mentre può ancora girare potrebbe produrre un secondo effetto",
		review.RationaleClaimUnseen:         "un webhook della destinazione riporta %s per questa operazione, ma nessuna interrogazione della destinazione l'ha mostrato: interroga di nuovo la destinazione; se ancora non mostra nulla, cercalo tu stesso presso la destinazione — confermalo se c'è, altrimenti segna l'operazione come fallita o approva un nuovo tentativo",
		review.RationaleEffectGone:          "la destinazione ha riportato %s per questa operazione, ma l'ultima interrogazione non trova nulla: interroga di nuovo la destinazione; se ancora non mostra nulla, cerca tu stesso la risorsa presso la destinazione — confermala se c'è; se è stata rimossa, approva un nuovo tentativo per crearla di nuovo, oppure segna l'operazione come fallita",
		review.RationaleLooksSplit:          "la ricerca di stato della destinazione trova %s per questa operazione, ma la sua ricerca nei metadati non trova nulla: interroga di nuovo la destinazione; se continuano a non concordare, cerca tu stesso la risorsa presso la destinazione — confermala se c'è; se non c'è, approva un nuovo tentativo per crearla, oppure segna l'operazione come fallita",
		review.RationaleUndoByHand:          "Limbo non invia l'annullamento di %s, scritta anche da altre operazioni: rimuovi tu stesso la parte di questa operazione presso la destinazione, poi indica che l'annullamento è avvenuto (compensation_done)",
	})
}
