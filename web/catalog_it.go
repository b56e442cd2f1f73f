package web

// The Italian of the shared parts: labels, components, layout. Vocabulary
// of the design documents: operazione, tentativo, esito ambiguo,
// riconciliazione, revisione, compensazione.
func init() {
	addItalian(map[string]string{
		// States.
		"Awaiting approval": "In attesa di approvazione",
		"Pending":           "In attesa",
		"In flight":         "In corso",
		"Waiting to retry":  "In attesa di nuovo tentativo",
		"Outcome unknown":   "Esito ambiguo",
		"Accepted, running": "Accettata, in esecuzione",
		"Needs review":      "Da rivedere",
		"Being undone":      "In compensazione",
		"Confirmed":         "Confermata",
		"Undone":            "Compensata",
		"Failed":            "Fallita",
		// Risks.
		"Read only":                "Sola lettura",
		"Generates content":        "Genera contenuti",
		"Idempotent write":         "Scrittura idempotente",
		"Write that can be undone": "Scrittura compensabile",
		"Irreversible":             "Irreversibile",
		// Reasons.
		"Moves money":                    "Movimenta denaro",
		"Cannot be undone":               "Non compensabile",
		"Regulated":                      "Regolamentata",
		"Sources disagree":               "Le fonti non concordano",
		"Deadline passed":                "Scadenza superata",
		"No way to check for duplicates": "Nessun modo di verificare i duplicati",
		"Payload differs":                "Payload diverso",
		"Possible duplicates":            "Possibili duplicati",
		"Version differs":                "Versione diversa",
		"Conflicting states":             "Stati in conflitto",
		"Retry budget used up":           "Tentativi esauriti",
		"Undo failed":                    "Compensazione fallita",
		"Approval required":              "Approvazione richiesta",
		"Dependency failed":              "Dipendenza fallita",
		// Actions and recommendations.
		"Confirm":                  "Conferma",
		"Undo":                     "Compensa",
		"Approve a retry":          "Approva un nuovo tentativo",
		"Mark failed":              "Segna come fallita",
		"Undo done":                "Compensazione eseguita",
		"Approve":                  "Approva",
		"Refuse":                   "Rifiuta",
		"Keep one, undo the other": "Tieni una, compensa l'altra",
		"Check again":              "Interroga di nuovo",
		"Review the payload":       "Rivedi il payload",
		"Undo by hand":             "Compensa a mano",
		// Components.
		"Copy": "Copia",
	})
}
