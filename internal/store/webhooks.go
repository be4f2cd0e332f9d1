package store

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/chatd/chatd/internal/dbgen"
)

// DeliveryState is a webhook delivery's state (webhook_deliveries.state).
type DeliveryState string

// Delivery states: pending until a 2xx answer (delivered) or until the
// endpoint's retry bound ran out (dead).
const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryDead      DeliveryState = "dead"
)

// Delivery is a claimed outbox row: one receipt owed to one endpoint.
type Delivery struct {
	RequestID uuid.UUID
	Endpoint  string
	Event     string
	// Attempt counts this claim; recording the outcome is guarded by it.
	Attempt   int32
	CreatedAt time.Time
}

// SyncWebhooks makes the database's webhook subscriptions those given (the
// events each configured endpoint takes; nil for none) and puts new ones in
// force on the database clock. From then on every request that finishes
// with a subscribed event gets a delivery row in its own transaction (the
// trigger in sql/triggers/050_webhooks.sql). Two transactions: the new rows
// are committed before the stamp, which waits for receipts being written.
func (s *Store) SyncWebhooks(ctx context.Context, events map[string][]string) error {
	var p dbgen.WebhookSubscriptionsReplaceParams
	for _, name := range slices.Sorted(maps.Keys(events)) {
		for _, e := range events[name] {
			p.Endpoints = append(p.Endpoints, name)
			p.Events = append(p.Events, e)
		}
	}
	if p.Endpoints == nil {
		p.Endpoints, p.Events = []string{}, []string{}
	}
	if err := mapError(s.q.WebhookSubscriptionsReplace(withPurpose(ctx, "webhook_sync"), s.pool, p)); err != nil {
		return err
	}
	return s.tx(ctx, "webhook_sync", func(tx pgx.Tx) error {
		if err := s.q.WebhookSubscriptionsLock(ctx, tx); err != nil {
			return err
		}
		return s.q.WebhookSubscriptionsStampIfInstalling(ctx, tx)
	})
}

// ClaimDeliveries claims up to limit due deliveries of the named endpoints
// for lease: no other worker takes them until the lease runs out.
func (s *Store) ClaimDeliveries(ctx context.Context, endpoints []string, limit int, lease time.Duration) ([]Delivery, error) {
	rows, err := s.q.WebhookDeliveriesClaim(withPurpose(ctx, "webhook_claim"), s.pool, dbgen.WebhookDeliveriesClaimParams{
		LeaseSeconds: lease.Seconds(), Endpoints: endpoints, MaxRows: int32(limit)})
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, Delivery{RequestID: r.RequestID, Endpoint: r.Endpoint, Event: r.Event, Attempt: r.Attempts, CreatedAt: r.CreatedAt})
	}
	return out, nil
}

// DeliveryDone records a 2xx answer. False: the claim was lost (its lease
// ran out and another worker took the row, or an operator changed it).
func (s *Store) DeliveryDone(ctx context.Context, d Delivery, status int) (bool, error) {
	st := int32(status)
	n, err := s.q.WebhookDeliveryDoneIfClaimed(withPurpose(ctx, "webhook_done"), s.pool, dbgen.WebhookDeliveryDoneIfClaimedParams{
		Status: &st, RequestID: d.RequestID, Endpoint: d.Endpoint, Attempts: d.Attempt})
	return n == 1, mapError(err)
}

// DeliveryFailed records a failed attempt (status 0: no HTTP answer): the
// row is retried after backoff, or dead once retryFor has passed since the
// receipt. It returns the row's new state, "" when the claim was lost.
func (s *Store) DeliveryFailed(ctx context.Context, d Delivery, status int, reason string, backoff, retryFor time.Duration) (DeliveryState, error) {
	var st *int32
	if status != 0 {
		v := int32(status)
		st = &v
	}
	states, err := s.q.WebhookDeliveryFailedIfClaimed(withPurpose(ctx, "webhook_failed"), s.pool, dbgen.WebhookDeliveryFailedIfClaimedParams{
		RetryForSeconds: retryFor.Seconds(), BackoffSeconds: backoff.Seconds(), Status: st, Error: &reason,
		RequestID: d.RequestID, Endpoint: d.Endpoint, Attempts: d.Attempt})
	if err != nil || len(states) == 0 {
		return "", mapError(err)
	}
	return DeliveryState(states[0]), nil
}

// RequestForDelivery reads a request and its receipt, whoever owns it (the
// webhook payload is the receipt as the API's lookup renders it); once its
// chat was deleted, its tombstone.
func (s *Store) RequestForDelivery(ctx context.Context, requestID uuid.UUID) (RequestState, error) {
	row, err := s.q.RequestGetWithReceipt(withPurpose(ctx, "webhook_read"), s.pool, requestID)
	if errors.Is(err, pgx.ErrNoRows) {
		st, _, terr := s.requestTombstone(ctx, s.pool, requestID)
		return st, mapError(terr)
	}
	if err != nil {
		return RequestState{}, mapError(err)
	}
	return requestStateFrom(dbgen.RequestGetForOwnerWithReceiptRow(row)), nil
}
