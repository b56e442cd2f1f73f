package web

// The Italian of the live updates: the case page's banner (live.templ)
// and the event stream's refusals (handlers/live.go).
func init() {
	addItalian(map[string]string{
		"This case was decided elsewhere — reload to see the decision.": "Questo caso è stato deciso altrove — ricarica la pagina per vedere la decisione.",
		"This case was closed elsewhere — reload to see why.":           "Questo caso è stato chiuso altrove — ricarica la pagina per vedere perché.",
		"This case was taken over by %s — reload to see it.":            "A questo caso è subentrato %s — ricarica la pagina per vederlo.",
		"This case was claimed by %s — reload to see it.":               "Questo caso è stato preso in carico da %s — ricarica la pagina per vederlo.",
		"This case changed elsewhere — reload before you decide.":       "Questo caso è cambiato altrove — ricarica la pagina prima di decidere.",
		"Reload": "Ricarica",
		"This address is the console's stream of live updates; pages open it on their own.": "Questo indirizzo è il flusso degli aggiornamenti in tempo reale della console: le pagine lo aprono da sole.",
		"Live updates are unavailable; the page refreshes on its own.":                      "Aggiornamenti in tempo reale non disponibili: la pagina si aggiorna da sola.",
	})
}
