package review

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxReasonLen bounds a reason a person types, in characters.
const MaxReasonLen = 2000

// NormalizeReason is a reason as it is recorded: trimmed, not blank, at
// most MaxReasonLen characters, prose without control characters (tab and
// newline allowed). Errors wrap ErrInvalid and name the field "reason".
func NormalizeReason(s string) (string, error) {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) < 3 {
		return "", fmt.Errorf("%w: field \"reason\": every decision needs a reason, in a few words", ErrInvalid)
	}
	if err := CheckText("reason", FreeText, MaxReasonLen, s); err != nil {
		return "", err
	}
	return s, nil
}

// ClaimHeldError: the case is held by another person, so only they may
// decide it — or whoever takes it over first, explicitly.
type ClaimHeldError struct {
	CaseID string
	By     string
	Until  time.Time
}

func (e *ClaimHeldError) Error() string {
	return fmt.Sprintf("case %s is held by %s until %s: only the holder decides; take it over, with a reason, to decide it yourself",
		e.CaseID, e.By, e.Until.UTC().Format(time.RFC3339))
}

// ClaimHolder is who holds a claim (by, until) at now: "" when nobody
// does, or the claim has run out.
func ClaimHolder(by string, until *time.Time, now time.Time) string {
	if by == "" || until == nil || !now.Before(*until) {
		return ""
	}
	return by
}

// CheckClaim says whether actor may decide a case claimed (by, until) at
// now: while a claim is live only its holder may; a case nobody holds is
// claimed and decided in one step.
func CheckClaim(caseID, by string, until *time.Time, actor string, now time.Time) error {
	if h := ClaimHolder(by, until, now); h != "" && !strings.EqualFold(h, actor) {
		return &ClaimHeldError{CaseID: caseID, By: h, Until: *until}
	}
	return nil
}
