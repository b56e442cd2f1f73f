package review

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const contractConfig = `
destinations:
  files:
    actions:
      upload_file:
        request:
          operation: uploadFile
          method: POST
          path: /files
          body: body
          schema: {"type":"object","required":["name"],"properties":{"name":{"type":"string","minLength":1},"size":{"type":"integer","minimum":0}}}
`

// A registration whose request body breaks the destination's schema is
// refused before it is planned, naming the field; one that keeps it is
// planned as any other.
func TestRequestContractRefusesNamingTheField(t *testing.T) {
	cfg, err := ParseConfig([]byte(contractConfig))
	if err != nil {
		t.Fatal(err)
	}
	reg := func(payload string) Registration {
		return Registration{Tenant: "t", SourceRef: "doc-1", LogicalVersion: "7", Action: "upload_file", Destination: "files",
			Risk: RiskCompensableWrite, Payload: []byte(payload)}
	}
	now := time.Now()
	for _, tc := range []struct{ payload, field, says string }{
		{`{"body":{}}`, "payload.body.name", "required"},
		{`{"body":{"name":""}}`, "payload.body.name", "minLength"},
		{`{"body":{"name":"a.docx","size":-1}}`, "payload.body.size", "minimum"},
		{`{"body":{"name":7}}`, "payload.body.name", "want string"},
		{`{"method":"POST"}`, "payload.body", "required"},
	} {
		_, err := PlanRegistration(reg(tc.payload), cfg, now)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `field "`+tc.field+`"`) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v, want ErrInvalid naming %s (%s)", tc.payload, err, tc.field, tc.says)
		}
	}
	if _, err := PlanRegistration(reg(`{"body":{"name":"a.docx","size":3}}`), cfg, now); err != nil {
		t.Fatalf("a body that keeps the schema: %v", err)
	}
	// Another action, no contract: anything goes.
	other := reg(`{"body":{}}`)
	other.Action = "create_folder"
	if _, err := PlanRegistration(other, cfg, now); err != nil {
		t.Fatalf("an action without a contract: %v", err)
	}
}

// A schema that does not compile, or refers outside itself, fails the
// configuration at start.
func TestRequestContractCheckedAtStart(t *testing.T) {
	for _, bad := range []string{
		strings.Replace(contractConfig, `{"type":"object"`, `{"type":"objekt"`, 1),
		strings.Replace(contractConfig, `{"type":"string","minLength":1}`, `{"$ref":"https://example.com/name.json"}`, 1),
		strings.Replace(contractConfig, "          body: body\n", "          body: \"a..b\"\n", 1),
		strings.Replace(contractConfig, "          schema:", "          schemas:", 1),
	} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("got %v, want ErrInvalid for\n%s", err, bad)
		}
	}
}
