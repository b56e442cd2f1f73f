package review

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContractCopies: docs/SPEC.md and docs/RELIABILITY.md are the
// product's contract, copied into the repository so that every reference
// resolves in a clone. The vocabulary review/ speaks — every state, risk
// class and flag — is named in the copy of SPEC; and where the product's
// shared/ folder sits beside the clone (the team's checkout), the copies
// are byte for byte what it holds, so they cannot drift unseen.
func TestContractCopies(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("..", "docs", "SPEC.md"))
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, s := range AllStates() {
		words = append(words, string(s))
	}
	for _, r := range AllRisks() {
		words = append(words, string(r))
	}
	for _, f := range AllFlags() {
		words = append(words, string(f))
	}
	for _, r := range AllReasons() {
		if beyondSpec[r] != "" {
			continue
		}
		words = append(words, string(r))
	}
	for _, w := range words {
		if !strings.Contains(string(spec), "`"+w+"`") {
			t.Errorf("docs/SPEC.md does not name `%s`, which review/ defines", w)
		}
	}
	for _, name := range []string{"SPEC.md", "RELIABILITY.md"} {
		shared, err := os.ReadFile(filepath.Join("..", "..", "shared", name))
		if os.IsNotExist(err) {
			t.Logf("../shared/%s is not beside this clone: the copy's freshness is checked where it is", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		copied, err := os.ReadFile(filepath.Join("..", "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shared, copied) {
			t.Errorf("docs/%s differs from the product's shared/%s: copy it again (cp ../shared/%s docs/)", name, name, name)
		}
	}
}

// beyondSpec are the reasons review/ defines that the contract does not
// name yet, each with why; the steering copy of SPEC should add them.
var beyondSpec = map[Reason]string{
	ReasonDependencyFailed: "issue 16: an operation's dependency failed, was compensated or was confirmed for another version",
}
