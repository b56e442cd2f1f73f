package web

// The Italian of payload retention: the purged payload's and outputs'
// notices on the operation and case pages, and its audit label.
func init() {
	addItalian(map[string]string{
		"Payload purged on": "Payload eliminato il",
		"The payload retention emptied it once the operation had been terminal long enough; the hash, the key, the states and the audit trail remain.": "La conservazione del payload lo ha eliminato quando l'operazione era conclusa da abbastanza tempo; restano l'hash, la chiave, gli stati e la traccia di audit.",
		"Payload purged (retention)":                    "Payload eliminato (conservazione)",
		"Attempt %d: output purged":                     "Tentativo %d: output eliminato",
		"Kept, then purged by the payload retention on": "Tenuto, poi eliminato dalla conservazione del payload il",
	})
}
