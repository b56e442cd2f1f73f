package handlers

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPIDoc is the OpenAPI 3.1 description of the integration API. A test
// checks it against the routes actually registered.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI serves the OpenAPI document.
func (h *Handlers) OpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDoc)
}
