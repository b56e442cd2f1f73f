package handlers

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDoc is the OpenAPI 3.1 description of the integration API and of
// the decision webhooks Limbo sends. Tests check it against the routes
// actually registered and the answers they give (openapi_test.go), against
// the webhooks the outbox worker sends (outbox/openapi_test.go), and with
// the generators integrators use (openapigen/, tools/openapi/check.sh).
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI serves the OpenAPI document.
func (h *Handlers) OpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
