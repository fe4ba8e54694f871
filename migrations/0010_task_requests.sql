-- 0010: laboratory and sampling task requests (spec 2.9, 3 and 4.9): the
-- laboratories and samplers of a tenant, the task requests between them,
-- and the history of every status change of a task.
--
-- Applied by scripts/migrate inside one transaction, like every migration.
--
-- Task requests are created elsewhere; the module assigns a sampler
-- (PATCH /api/v1/task-requests/{id}/assign-sampler) and accepts, rejects
-- or reopens a task (.../toggle-accept-reject). Each operation is one
-- statement that locks the task's row, changes it and writes the history
-- row of the change, so a task's history is always the chain of its
-- statuses.
--
-- Laboratories and samplers are named by uuid, as tasks are; tenants by
-- text, as everywhere. The composite keys (tenant_id, id) let every row
-- that points at a laboratory, a sampler or a task name the tenant too: a
-- task can only ever hold a sampler of its own tenant.

-- A laboratory: it asks for samples to be taken and receives them.
CREATE TABLE laboratories (
    id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     text         NOT NULL,
    country_code  text         NOT NULL,
    name          text         NOT NULL,
    created_at    timestamptz  NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id)
);

-- A sampler: someone who collects samples for the tenant's laboratories.
-- The assign statement finds one by (tenant_id, id) through the unique
-- index.
CREATE TABLE samplers (
    id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     text         NOT NULL,
    name          text         NOT NULL,
    phone         text,
    created_at    timestamptz  NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id)
);

-- A task request: a laboratory's request for a sample to be taken in a
-- country, and, once assigned, the sampler who takes it.
--
--   status        PENDING (new, or reopened), ASSIGNED (a sampler was
--                 assigned), ACCEPTED, REJECTED
--   priority      LOW, MEDIUM, HIGH; set by the assignment
--   due_at        when the task is due; set by the assignment. A date
--                 without a time (due_all_day) is due during that whole
--                 day, UTC, and is stored as its midnight, UTC.
--
-- An ASSIGNED task has a sampler, a priority and a due date. A task keeps
-- its sampler when it is accepted, rejected or reopened, so that the
-- sampler can still answer for it.
CREATE TABLE task_requests (
    id              uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id       text         NOT NULL,
    country_code    text         NOT NULL,
    laboratory_id   uuid         NOT NULL,
    sampler_id      uuid,
    status          text         NOT NULL DEFAULT 'PENDING'
                    CHECK (status IN ('PENDING', 'ASSIGNED', 'ACCEPTED',
                                      'REJECTED')),
    priority        text         CHECK (priority IN ('LOW', 'MEDIUM',
                                                     'HIGH')),
    due_at          timestamptz,
    due_all_day     boolean      NOT NULL DEFAULT false,
    description     text,
    pickup_address  text,
    created_at      timestamptz  NOT NULL DEFAULT now(),
    updated_at      timestamptz  NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, id),
    CHECK (status <> 'ASSIGNED'
           OR (sampler_id IS NOT NULL AND priority IS NOT NULL
               AND due_at IS NOT NULL)),
    FOREIGN KEY (tenant_id, laboratory_id)
        REFERENCES laboratories (tenant_id, id),
    FOREIGN KEY (tenant_id, sampler_id)
        REFERENCES samplers (tenant_id, id)
);

-- the tasks of a laboratory and of a sampler (and the foreign keys' checks
-- when one of them is deleted)
CREATE INDEX task_requests_laboratory_idx
    ON task_requests (tenant_id, laboratory_id);
CREATE INDEX task_requests_sampler_idx
    ON task_requests (tenant_id, sampler_id);

-- One row per status change of a task, written by the statement that
-- changes it: who (the userId header of the request), from which status
-- to which, when. A request that leaves the status as it was writes none.
-- id grows in the order the changes took the task's row lock, so a task's
-- rows in id order are the chain of its statuses: each from_status is the
-- previous row's to_status. changed_at is the time of the change itself
-- (clock_timestamp(), not the start of its transaction).
CREATE TABLE task_request_history (
    id            bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id       uuid         NOT NULL,
    tenant_id     text         NOT NULL,
    changed_by    text         NOT NULL,
    from_status   text         NOT NULL,
    to_status     text         NOT NULL,
    changed_at    timestamptz  NOT NULL DEFAULT clock_timestamp(),
    CHECK (from_status IN ('PENDING', 'ASSIGNED', 'ACCEPTED', 'REJECTED')),
    CHECK (to_status IN ('PENDING', 'ASSIGNED', 'ACCEPTED', 'REJECTED')),
    CHECK (from_status <> to_status),
    FOREIGN KEY (tenant_id, task_id)
        REFERENCES task_requests (tenant_id, id) ON DELETE CASCADE
);

-- a task's history in order (and the foreign key's checks on delete)
CREATE INDEX task_request_history_task_idx
    ON task_request_history (tenant_id, task_id, id);

-- The dueDate of an assignment as a time, or NULL when PostgreSQL cannot
-- read it. The module accepts ISO 8601 dates and date-times; a few of
-- those are beyond timestamptz (an offset past 15:59, a leap second with
-- a fraction, a fraction of a hundred digits), and the statement answers
-- them 400 instead of failing. A date alone is its midnight, UTC; a
-- date-time without an offset is in the session's time zone (UTC unless
-- platform_pg sets options).
CREATE FUNCTION platform_task_due(due text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF length(due) = 10 THEN
        RETURN due::date::timestamp AT TIME ZONE 'UTC';
    END IF;

    RETURN due::timestamptz;
EXCEPTION
    WHEN data_exception THEN
        RETURN NULL;
END
$$;
