-- 0001: reference data, transport management (drivers, delivery orders).
--
-- Applied by scripts/migrate inside one transaction. No role or owner is
-- named here: the tables belong to whoever runs the migration.
--
-- Every business row carries its tenant (tenant_id); every query of the
-- module is scoped by it. product_classifications is global reference data
-- served without authentication, so it has no tenant.

CREATE TABLE product_classifications (
    id          bigserial   PRIMARY KEY,
    group_name  text        NOT NULL UNIQUE,
    tags        text[]      NOT NULL DEFAULT '{}',
    position    int         NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE drivers (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     text        NOT NULL,
    country_code  text        NOT NULL,
    user_id       text,
    name          text        NOT NULL,
    phone         text,
    vehicle_type  text,
    status        text        NOT NULL DEFAULT 'AVAILABLE'
                  CHECK (status IN ('AVAILABLE', 'ON_DELIVERY', 'OFFLINE')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX drivers_tenant_country_status_idx
    ON drivers (tenant_id, country_code, status);

-- pickup_address and dropoff_address are JSON objects with the keys
-- address, city, state, country, postalCode, latitude, longitude,
-- contactName, contactPhone.
CREATE TABLE delivery_orders (
    id               uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id        text          NOT NULL,
    country_code     text          NOT NULL,
    order_number     text          NOT NULL,
    status           text          NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'ASSIGNED', 'PICKED_UP',
                                       'IN_TRANSIT', 'DELIVERED',
                                       'CANCELLED')),
    pickup_address   jsonb         NOT NULL,
    dropoff_address  jsonb         NOT NULL,
    driver_id        uuid          REFERENCES drivers (id),
    shipping_fee     numeric(14,2) CHECK (shipping_fee >= 0),
    currency         text,
    created_at       timestamptz   NOT NULL DEFAULT now(),
    updated_at       timestamptz   NOT NULL DEFAULT now(),
    assigned_at      timestamptz,
    UNIQUE (tenant_id, order_number)
);

CREATE INDEX delivery_orders_tenant_id_idx
    ON delivery_orders (tenant_id, id);

CREATE INDEX delivery_orders_driver_idx
    ON delivery_orders (driver_id) WHERE driver_id IS NOT NULL;
