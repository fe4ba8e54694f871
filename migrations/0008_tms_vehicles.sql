-- 0008: vehicles of transport management (spec 2.7, updated by
-- PUT /tms/vehicles/{uuid}) and what the available drivers list reads
-- (GET /tms/drivers/available).
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- A vehicle belongs to a tenant in a country, like drivers and delivery
-- orders, and has at most one driver: a driver of the same tenant and
-- country (the composite foreign key), who drives no other vehicle (the
-- unique driver_id). Clients name the driver by its user id
-- (driverUserId, drivers.user_id), which is therefore unique among the
-- drivers of a tenant in a country.

-- the target of the vehicles' foreign key: a driver named with its
-- tenant and country
ALTER TABLE drivers
    ADD CONSTRAINT drivers_tenant_country_id_key
        UNIQUE (tenant_id, country_code, id);

-- driverUserId finds one driver, through this index
CREATE UNIQUE INDEX drivers_tenant_country_user_key
    ON drivers (tenant_id, country_code, user_id)
    WHERE user_id IS NOT NULL;

-- GET /tms/drivers/available: a tenant's available drivers in a country
-- (by the first two columns), or those of one vehicle type, compared in
-- lower case (by all three)
CREATE INDEX drivers_available_idx
    ON drivers (tenant_id, country_code, lower(vehicle_type))
    WHERE status = 'AVAILABLE';

-- year and capacity are what the module accepts (docs/api.md): a year of
-- four digits, a capacity of at most nine digits before the point and
-- three after it. capacity is numeric without a scale, so that "1500.50"
-- is kept and answered as it was given. The unique driver_id is checked
-- at the end of each statement (DEFERRABLE), so that one statement may
-- move a driver from a vehicle to another.
CREATE TABLE vehicles (
    id                    uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id             text         NOT NULL,
    country_code          text         NOT NULL,
    driver_id             uuid,
    license_plate         text,
    model                 text,
    manufacturer          text,
    type                  text,
    colour                text,
    year                  smallint     CHECK (year BETWEEN 1000 AND 9999),
    capacity              numeric      CHECK (capacity >= 0
                                              AND capacity < 1000000000
                                              AND scale(capacity) <= 3),
    condition             text,
    image_url             text,
    carrier_id            text,
    carrier_phone_number  text,
    created_at            timestamptz  NOT NULL DEFAULT now(),
    updated_at            timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT vehicles_driver_key UNIQUE (driver_id) DEFERRABLE,
    CONSTRAINT vehicles_driver_fkey
        FOREIGN KEY (tenant_id, country_code, driver_id)
        REFERENCES drivers (tenant_id, country_code, id)
);
