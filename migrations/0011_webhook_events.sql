-- 0011: webhook events (spec 4.11 and 6, decisions.md section 3
-- "Webhooks"), stored by POST /api/v1/webhooks/public/{source}/events,
-- POST /api/webhooks/public/{source}/events and POST /webhooks/{paymentmethod}.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- One row per event, stored before the sender is answered 200: who sent it
-- (kind: a source or a payment method, and its configured name), the
-- tenant of the credential that delivered it (NULL without one), the event
-- key the module derived (docs/api.md: the Idempotency-Key or webhook-id
-- header, else the body's id or eventId, else the body's SHA-256), the
-- request headers that matter as a JSON object, the body byte for byte and
-- the time it arrived.
--
-- The unique index is the durable guard of "each event stored once": the
-- module inserts with ON CONFLICT DO NOTHING on it, so a second delivery
-- of a key, concurrent or days later, with or without Redis, adds nothing.
-- It is scoped by tenant too (a NULL tenant is one more scope, hence the
-- coalesce), so that one tenant's sender can neither suppress nor probe
-- another tenant's events by choosing their keys.
--
-- Each new row is announced with NOTIFY on the channel "webhook_events"
-- (sent when the inserting transaction commits, never for a duplicate),
-- payload {"id", "kind", "name", "tenantId", "key"}: a consumer LISTENs
-- and reads the row, never the body from the notification.

CREATE TABLE webhook_events (
    id           bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id    text,
    kind         text         NOT NULL
                              CHECK (kind IN ('source', 'payment_method')),
    name         text         NOT NULL CHECK (length(name) BETWEEN 1 AND 64),
    event_key    text         NOT NULL
                              CHECK (length(event_key) BETWEEN 1 AND 200),
    headers      jsonb        NOT NULL DEFAULT '{}'
                              CHECK (jsonb_typeof(headers) = 'object'),
    body         bytea        NOT NULL,
    signed       boolean      NOT NULL DEFAULT false,
    received_at  timestamptz  NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX webhook_events_key_idx
    ON webhook_events (kind, name, (coalesce(tenant_id, '')), event_key);

-- a consumer reads what arrived since its last id, or by time
CREATE INDEX webhook_events_received_idx ON webhook_events (received_at);

-- bodies are JSON text: compressible, unlike documents, so the default
-- storage (compressed, out of line when large) stays

CREATE FUNCTION webhook_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('webhook_events', row_to_json(p)::text)
       FROM (SELECT NEW.id AS id, NEW.kind AS kind, NEW.name AS name,
                    NEW.tenant_id AS "tenantId", NEW.event_key AS key) p;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_events_notify
    AFTER INSERT ON webhook_events
    FOR EACH ROW EXECUTE FUNCTION webhook_events_notify();
