package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/limbo-dev/limbo/netguard"
	"github.com/limbo-dev/limbo/review"
	"github.com/limbo-dev/limbo/webhook"
)

// WebhookEndpoint is one of a tenant's receivers of decision webhooks.
type WebhookEndpoint struct {
	ID     string `json:"id" db:"id"`
	Tenant string `json:"tenant" db:"tenant"`
	URL    string `json:"url" db:"url"`
	// Secret ("whsec_…") is filled only by AddWebhookEndpoint (shown once)
	// and RevealWebhookSecret (audited); listings leave it empty.
	Secret      string     `json:"-" db:"secret"`
	Description string     `json:"description" db:"description"`
	DisabledAt  *time.Time `json:"disabled_at,omitempty" db:"disabled_at"`
	CreatedAt   time.Time  `json:"created_at" db:"created_at"`
}

// NewWebhookEndpoint is an endpoint to add.
type NewWebhookEndpoint struct {
	Tenant string
	URL    string
	// Secret may be empty: a fresh one is generated.
	Secret      string
	Description string
}

const endpointColumns = `id, tenant, url, secret, description, disabled_at, created_at`

const (
	/* Store.AddWebhookEndpoint */
	insertEndpoint = `INSERT INTO webhook_endpoints (id, tenant, url, secret, description, created_at) VALUES (?, ?, ?, ?, ?, ?)`
	/* Store.ListWebhookEndpoints */
	selectEndpoints = `SELECT ` + endpointColumns + ` FROM webhook_endpoints`
	/* Store.GetWebhookEndpoint */
	selectEndpoint = `SELECT ` + endpointColumns + ` FROM webhook_endpoints WHERE id = ?`
	/* Store.enabledTwin: the tenant's row, locked on PostgreSQL so that two
	   adds of one URL at once serialise and the second sees the first. */
	lockTenant = `SELECT name FROM tenants WHERE name = ?`
	/* Store.enabledTwin */
	selectEnabledTwin = `SELECT id FROM webhook_endpoints WHERE tenant = ? AND url = ? AND disabled_at IS NULL AND id <> ? ORDER BY id LIMIT 1`
	/* Store.DisableWebhookEndpoint */
	disableEndpoint = `UPDATE webhook_endpoints SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL`
	/* Store.DisableWebhookEndpoint: unleased pending messages stop at once; a try in flight completes first. */
	failEndpointMessages = `
UPDATE outbox SET status = 'failed', last_error = 'endpoint disabled', lease_owner = NULL, lease_until = NULL
WHERE endpoint_id = ? AND status = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`
	/* Store.EnableWebhookEndpoint */
	enableEndpoint = `UPDATE webhook_endpoints SET disabled_at = NULL WHERE id = ? AND disabled_at IS NOT NULL`
	/* Store.RedeliverWebhookMessages: given-up messages are due now, with a new give-up window. */
	redeliverMessages = `
UPDATE outbox SET status = 'pending', next_attempt_at = ?, retry_from = ?
WHERE endpoint_id = ? AND status = 'failed'`
	/* Store.RedeliveryOf */
	countRedelivery = `SELECT COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) AS given_up,
    COALESCE(SUM(CASE WHEN status = 'pending' AND retry_from IS NOT NULL THEN 1 ELSE 0 END), 0) AS again
FROM outbox WHERE endpoint_id = ?`
)

// AddWebhookEndpoint adds a receiver of the tenant's decision webhooks and
// returns it with its secret, generated when none is given: the one time
// a listing shows it. The URL must be https (http only for a target
// webhooks.allow_internal lists), without credentials, and not aimed at an
// internal address the configuration does not opt in.
func (s *Store) AddWebhookEndpoint(ctx context.Context, by review.Principal, ne NewWebhookEndpoint) (*WebhookEndpoint, error) {
	tenant, err := review.NormalizeTenant(ne.Tenant)
	if err != nil {
		return nil, err
	}
	if err := by.CheckAdministers(tenant); err != nil {
		return nil, err // before the URL is looked up: no DNS on behalf of someone refused
	}
	u, err := s.checkWebhookURL(ctx, ne.URL)
	if err != nil {
		return nil, err
	}
	desc := strings.TrimSpace(ne.Description)
	if err := review.CheckText("description", review.FreeText, 500, desc); err != nil {
		return nil, err
	}
	secret := strings.TrimSpace(ne.Secret)
	if secret == "" {
		if secret, err = webhook.NewSecret(); err != nil {
			return nil, fmt.Errorf("store.AddWebhookEndpoint: %w", err)
		}
	} else if key, err := webhook.ParseSecret(secret); err != nil || len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("%w: field \"secret\": give whsec_ and base64 of 24–64 random bytes, or leave it empty", review.ErrInvalid)
	}
	now := s.now()
	ep := &WebhookEndpoint{ID: newID("whe_", now), Tenant: tenant, URL: u, Secret: secret, Description: desc, CreatedAt: now}
	err = s.WithTx(ctx, func(tx *sqlx.Tx) error {
		by, err := s.administering(ctx, tx, by, tenant)
		if err != nil {
			return err
		}
		if err := s.ensureTenant(ctx, tx, tenant, now); err != nil {
			return err
		}
		if err := s.enabledTwin(ctx, tx, tenant, ep.URL, ep.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(insertEndpoint), ep.ID, ep.Tenant, ep.URL, ep.Secret, ep.Description, now); err != nil {
			return err
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: tenant, Action: "webhook.endpoint_added",
			Detail: detailJSON(map[string]any{"endpoint_id": ep.ID, "url": ep.URL, "description": ep.Description})})
	})
	if errors.Is(err, review.ErrForbidden) || errors.Is(err, review.ErrConflict) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("store.AddWebhookEndpoint: %w", err)
	}
	return ep, nil
}

// enabledTwin refuses a second enabled endpoint of tenant at url (besides
// the endpoint id): every decision would go to that receiver twice, under
// two event ids it cannot deduplicate and two secrets of which it knows
// one. A form sent twice (a reload of the page that showed the secret, a
// double click) added exactly that. To replace an endpoint (a new secret),
// disable the old one first.
func (s *Store) enabledTwin(ctx context.Context, tx *sqlx.Tx, tenant, url, id string) error {
	var name string
	if err := tx.GetContext(ctx, &name, s.rebind(s.lockRows(lockTenant)), tenant); err != nil {
		return err
	}
	var twin string
	err := tx.GetContext(ctx, &twin, s.rebind(selectEnabledTwin), tenant, url, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: field \"url\": tenant %s already has an enabled endpoint at this URL (%s); disable it first to replace it", review.ErrConflict, tenant, twin)
}

// addTimeLookup bounds the lookup of an endpoint's name when it is added.
const addTimeLookup = 2 * time.Second

// WebhookPolicy is what webhooks.allow_internal opts in, for the outbox
// worker's client and for the checks here.
func WebhookPolicy(cfg *review.Config) netguard.Policy {
	if cfg == nil {
		return netguard.Policy{}
	}
	a := cfg.Webhooks.AllowInternal
	return netguard.Policy{Prefixes: a.Prefixes, Hosts: a.Hosts}
}

// checkWebhookURL accepts an absolute https URL with a host — http only
// for a target webhooks.allow_internal lists — without credentials, whose
// target netguard would let a delivery reach. It checks now what every
// delivery checks again at dial time, so that the admin learns at once
// which rule refuses the URL and how to opt in.
func (s *Store) checkWebhookURL(ctx context.Context, raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: field \"url\": %s", review.ErrInvalid, why)
	}
	if raw == "" || len(raw) > 2048 {
		return bad("give an https URL of at most 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return bad("must start with https://")
	}
	if u.Hostname() == "" {
		return bad("needs a host")
	}
	if u.Fragment != "" {
		return bad("must not carry a #fragment")
	}
	if u.User != nil {
		// Stored, it would be shown to every admin and written to the
		// audit trail; the signature already authenticates Limbo.
		return bad("must not carry credentials (user:password@); the receiver verifies the signature instead")
	}
	pol := WebhookPolicy(s.cfg)
	g := &netguard.Guard{Policy: pol, Resolve: s.resolve, ListedOnly: scheme == "http"}
	lctx, cancel := context.WithTimeout(ctx, addTimeLookup)
	defer cancel()
	err = g.Check(lctx, u.Hostname())
	var refusal *netguard.Refusal
	refused := errors.As(err, &refusal)
	switch {
	case refused && refusal.Rule != netguard.RuleNotListed:
		return bad(fmt.Sprintf("%s; to allow it, add it to webhooks.allow_internal in the configuration file", refusal))
	case refused, err != nil && scheme == "http" && !pol.AllowsHost(u.Hostname()):
		// Plain http needs a target shown to be listed: a listed name, or
		// addresses inside listed prefixes. A name that does not resolve
		// now shows nothing.
		return bad("use https: plain http is accepted only for targets listed in webhooks.allow_internal in the configuration file")
	case err != nil:
		// An https name that does not resolve now is accepted: it may by
		// the first delivery, and the dial-time guard decides then — at
		// every delivery, on what the name resolves to at that moment.
	}
	return u.String(), nil
}

// ListWebhookEndpoints lists the endpoints of the tenants in scope (nil:
// all), enabled and disabled, by tenant then age. Secrets are left out.
func (s *Store) ListWebhookEndpoints(ctx context.Context, scope []string) ([]WebhookEndpoint, error) {
	q, args := selectEndpoints, []any{}
	if scope != nil {
		if len(scope) == 0 {
			return nil, nil
		}
		in, a, err := sqlx.In(" WHERE tenant IN (?)", scope)
		if err != nil {
			return nil, fmt.Errorf("store.ListWebhookEndpoints: %w", err)
		}
		q, args = q+in, a
	}
	var eps []WebhookEndpoint
	if err := s.db.SelectContext(ctx, &eps, s.rebind(q+" ORDER BY tenant, id"), args...); err != nil {
		return nil, fmt.Errorf("store.ListWebhookEndpoints: %w", err)
	}
	for i := range eps {
		eps[i].Secret = ""
		eps[i].fill()
	}
	return eps, nil
}

// GetWebhookEndpoint returns one endpoint, without its secret. Unknown or
// out of scope is review.ErrNotFound.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string, scope []string) (*WebhookEndpoint, error) {
	ep, err := s.endpoint(ctx, s.db, id, scope)
	if err != nil {
		return nil, err
	}
	ep.Secret = ""
	return ep, nil
}

// RevealWebhookSecret returns an endpoint's signing secret to by, an
// admin of its tenant, and audits that they saw it.
func (s *Store) RevealWebhookSecret(ctx context.Context, by review.Principal, id string) (string, error) {
	secret, err := inTx(ctx, s, func(tx *sqlx.Tx) (string, error) {
		ep, err := s.administeredEndpoint(ctx, tx, by, id)
		if err != nil {
			return "", err
		}
		return ep.Secret, s.appendEvent(ctx, tx, &AuditEvent{Actor: by.Name, Tenant: ep.Tenant, Action: "webhook.secret_revealed",
			Detail: detailJSON(map[string]any{"endpoint_id": ep.ID})})
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) {
			return "", err
		}
		return "", fmt.Errorf("store.RevealWebhookSecret: %w", err)
	}
	return secret, nil
}

// DisableWebhookEndpoint stops deliveries to an endpoint: no new messages
// are enqueued for it, and its pending ones are marked failed (a try in
// flight completes first). Disabling a disabled endpoint changes nothing.
func (s *Store) DisableWebhookEndpoint(ctx context.Context, by review.Principal, id string) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		ep, err := s.administeredEndpoint(ctx, tx, by, id)
		if err != nil {
			return err
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, s.rebind(disableEndpoint), now, ep.ID)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return nil // already disabled
		}
		res, err = tx.ExecContext(ctx, s.rebind(failEndpointMessages), ep.ID, now)
		if err != nil {
			return err
		}
		dropped, _ := res.RowsAffected()
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: ep.Tenant, Action: "webhook.endpoint_disabled",
			Detail: detailJSON(map[string]any{"endpoint_id": ep.ID, "url": ep.URL, "pending_failed": dropped})})
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) {
			return err
		}
		return fmt.Errorf("store.DisableWebhookEndpoint: %w", err)
	}
	return nil
}

// EnableWebhookEndpoint lets a disabled endpoint receive decisions again:
// the ones decided from now on. What was decided meanwhile was never
// enqueued for it (the decisions feed has it), and the messages given up
// when it was disabled stay given up until RedeliverWebhookMessages.
// Enabling an enabled endpoint changes nothing.
func (s *Store) EnableWebhookEndpoint(ctx context.Context, by review.Principal, id string) error {
	err := s.WithTx(ctx, func(tx *sqlx.Tx) error {
		ep, err := s.administeredEndpoint(ctx, tx, by, id)
		if err != nil {
			return err
		}
		if ep.DisabledAt != nil {
			if err := s.enabledTwin(ctx, tx, ep.Tenant, ep.URL, ep.ID); err != nil {
				return err
			}
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, s.rebind(enableEndpoint), ep.ID)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return nil // already enabled
		}
		return s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: ep.Tenant, Action: "webhook.endpoint_enabled",
			Detail: detailJSON(map[string]any{"endpoint_id": ep.ID, "url": ep.URL})})
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) || errors.Is(err, review.ErrConflict) {
			return err
		}
		return fmt.Errorf("store.EnableWebhookEndpoint: %w", err)
	}
	return nil
}

// ErrEndpointDisabled: messages are delivered again only to an enabled
// endpoint.
var ErrEndpointDisabled = fmt.Errorf("%w: the endpoint is disabled; enable it first", review.ErrConflict)

// RedeliverWebhookMessages makes every given-up message of an enabled
// endpoint due again, and returns how many. Each keeps its webhook-id, so
// a receiver that has it already can drop it, and its tries' history (the
// count goes on); its give-up window starts again now, so a receiver that
// is still down gets the usual three days of tries. This is the way out of
// "given up": after an outage longer than the retries, or once a disabled
// endpoint is enabled again.
func (s *Store) RedeliverWebhookMessages(ctx context.Context, by review.Principal, id string) (int, error) {
	n, err := inTx(ctx, s, func(tx *sqlx.Tx) (int, error) {
		ep, err := s.administeredEndpoint(ctx, tx, by, id)
		if err != nil {
			return 0, err
		}
		if ep.DisabledAt != nil {
			return 0, ErrEndpointDisabled
		}
		now := s.now()
		res, err := tx.ExecContext(ctx, s.rebind(redeliverMessages), now, now, ep.ID)
		if err != nil {
			return 0, err
		}
		k, err := res.RowsAffected()
		if err != nil || k == 0 {
			return 0, err // nothing given up: nothing changed, nothing to audit
		}
		return int(k), s.appendEvent(ctx, tx, &AuditEvent{At: now, Actor: by.Name, Tenant: ep.Tenant, Action: "webhook.redelivered",
			Detail: detailJSON(map[string]any{"endpoint_id": ep.ID, "url": ep.URL, "messages": k})})
	})
	if err != nil {
		if errors.Is(err, review.ErrNotFound) || errors.Is(err, review.ErrForbidden) || errors.Is(err, review.ErrConflict) {
			return 0, err
		}
		return 0, fmt.Errorf("store.RedeliverWebhookMessages: %w", err)
	}
	return n, nil
}

// Redelivery is where an endpoint's messages stand for the page that
// delivers the given-up ones again.
type Redelivery struct {
	// GivenUp counts the messages given up; Again those an admin delivered
	// again that are still on their way (read from the messages, so a
	// reload or a bookmark shows what is true now).
	GivenUp int `db:"given_up"`
	Again   int `db:"again"`
}

// RedeliveryOf counts an endpoint's messages given up and delivered again.
// Unknown or out of scope is review.ErrNotFound.
func (s *Store) RedeliveryOf(ctx context.Context, id string, scope []string) (Redelivery, error) {
	if _, err := s.endpoint(ctx, s.db, id, scope); err != nil {
		return Redelivery{}, err
	}
	var r Redelivery
	if err := s.db.GetContext(ctx, &r, s.rebind(countRedelivery), id); err != nil {
		return Redelivery{}, fmt.Errorf("store.RedeliveryOf: %w", err)
	}
	return r, nil
}

// administeredEndpoint is the endpoint id as by, acting now, may change it:
// another tenant's is review.ErrNotFound, as elsewhere.
func (s *Store) administeredEndpoint(ctx context.Context, tx *sqlx.Tx, by review.Principal, id string) (*WebhookEndpoint, error) {
	by, err := s.actingNow(ctx, tx, by)
	if err != nil {
		return nil, err
	}
	ep, err := s.endpoint(ctx, tx, id, nil)
	if err != nil {
		return nil, err
	}
	if err := by.CheckAdministers(ep.Tenant); err != nil {
		if by.Role.Can(review.PermAdmin) {
			return nil, review.ErrNotFound
		}
		return nil, err
	}
	return ep, nil
}

func (s *Store) endpoint(ctx context.Context, q sqlx.QueryerContext, id string, scope []string) (*WebhookEndpoint, error) {
	var ep WebhookEndpoint
	err := sqlx.GetContext(ctx, q, &ep, s.rebind(selectEndpoint), id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, review.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store.endpoint: %w", err)
	}
	if scope != nil && !slices.Contains(scope, ep.Tenant) {
		return nil, review.ErrNotFound
	}
	ep.fill()
	return &ep, nil
}

func (ep *WebhookEndpoint) fill() {
	// An endpoint stored before credentials were refused keeps them in its
	// URL; no listing, page or audit detail shows the password (deliveries
	// to it are refused by the worker).
	if u, err := url.Parse(ep.URL); err == nil && u.User != nil {
		ep.URL = u.Redacted()
	}
	ep.CreatedAt = ep.CreatedAt.UTC()
	if ep.DisabledAt != nil {
		t := ep.DisabledAt.UTC()
		ep.DisabledAt = &t
	}
}
