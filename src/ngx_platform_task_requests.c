
/*
 * ngx_platform: laboratory and sampling task requests (spec 2.9, 3, 4.9
 * and 5, decisions.md sections 2 and 3 "Task requests"). Envelope B for
 * errors; a success is the body the specification shows, built by the
 * statement (ANSWER_RAW). The caller names its tenant and itself in the
 * tenantId and userId headers; countryCode is optional and, when sent,
 * narrows the caller's view to the tasks of that country. Another
 * tenant's (or country's) task is 404, like an unknown one.
 *
 * Each operation is one statement: it locks the task's row, decides
 * under that lock (the refusals of the outcome tables below), changes
 * the task and writes the history row of a status change, so concurrent
 * requests on one task are applied one after the other and its history
 * is the chain of its statuses.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * The task of the path, in the caller's tenant (and country, when the
 * countryCode header is sent), locked: $1 the id, $2 the tenant, $3 the
 * country or NULL. Its status is the one the lock found, which the
 * change starts from.
 */

#define NGX_PLATFORM_TASK_LOCKED                                             \
    " t AS MATERIALIZED (SELECT r.id, r.status, r.sampler_id,"               \
    " r.laboratory_id FROM task_requests r"                                  \
    " WHERE r.id = $1::uuid AND r.tenant_id = $2"                            \
    " AND ($3::text IS NULL OR r.country_code = $3::text)"                   \
    " FOR UPDATE),"

/* the history row of a change, when the status changed: $4 the userId */

#define NGX_PLATFORM_TASK_HISTORY                                            \
    " h AS (INSERT INTO task_request_history"                                \
    " (task_id, tenant_id, changed_by, from_status, to_status, changed_at)"  \
    " SELECT u.id, $2, $4, u.previous, u.status, u.updated_at FROM u"        \
    " WHERE u.previous <> u.status)"


/*
 * PATCH assign-sampler. $5 the checked body. The refusals, in order: a
 * dueDate PostgreSQL cannot read or in the past (a date alone is the
 * whole day, UTC: today is not past), no such task (no refusal, no data:
 * 404), a samplerId that is not a sampler of the tenant, a REJECTED task.
 * description and pickupAddress replace the stored ones when present
 * (null clears them), else are kept.
 */

static ngx_platform_outcome_t  ngx_platform_task_requests_assign_outcomes[] = {
    { "due_invalid", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "dueDate must be an ISO 8601 date or date-time." },
    { "due_past", NGX_HTTP_BAD_REQUEST, "Bad request.",
      "dueDate must not be in the past." },
    { "sampler", NGX_HTTP_BAD_REQUEST, "Invalid reference.",
      "samplerId is not a sampler of the tenant." },
    { "rejected", NGX_HTTP_CONFLICT, "Task request rejected.",
      "A rejected task request cannot be assigned; set it to PENDING or "
      "ACCEPTED first." },
    { NULL, 0, NULL, NULL }
};


#define NGX_PLATFORM_TASK_SET(column, field)                                 \
    NGX_PLATFORM_SQL_SET("v.b", "r", column, field, "")

static ngx_platform_sql_t  ngx_platform_task_requests_assign = {
    { "platform_task_requests_assign",

      "WITH v AS MATERIALIZED (SELECT b, platform_task_due(b->>'dueDate')"
      " AS due_at, length(b->>'dueDate') = 10 AS all_day"
      " FROM (SELECT $5::jsonb AS b) p),"
      NGX_PLATFORM_TASK_LOCKED
      " s AS MATERIALIZED (SELECT s.id FROM samplers s, v"
      " WHERE s.tenant_id = $2 AND s.id = (v.b->>'samplerId')::uuid),"
      " f AS MATERIALIZED (SELECT CASE"
      " WHEN v.due_at IS NULL THEN 'due_invalid'"
      " WHEN v.due_at < CASE WHEN v.all_day"
      " THEN date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
      " ELSE now() END THEN 'due_past'"
      " WHEN NOT EXISTS (SELECT 1 FROM t) THEN NULL"
      " WHEN NOT EXISTS (SELECT 1 FROM s) THEN 'sampler'"
      " WHEN (SELECT t.status FROM t) = 'REJECTED' THEN 'rejected'"
      " END AS refusal FROM v),"
      " u AS (UPDATE task_requests r SET status = 'ASSIGNED',"
      " sampler_id = s.id, priority = v.b->>'priority',"
      " due_at = v.due_at, due_all_day = v.all_day,"
      NGX_PLATFORM_TASK_SET("description", "description")
      NGX_PLATFORM_TASK_SET("pickup_address", "pickupAddress")
      " updated_at = clock_timestamp()"
      " FROM t, s, v, f"
      " WHERE r.id = $1::uuid AND r.tenant_id = $2 AND f.refusal IS NULL"
      " RETURNING r.id, r.sampler_id, r.status, r.updated_at,"
      " t.status AS previous),"
      NGX_PLATFORM_TASK_HISTORY
      " SELECT (SELECT f.refusal FROM f),"
      " (SELECT row_to_json(x)::text FROM (SELECT"
      " 'Sampler assigned to the task request.' AS message,"
      " u.id AS \"taskId\", u.sampler_id AS \"samplerId\", u.status"
      " FROM u) x)",

      5, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY,
      NGX_PLATFORM_P_USER, NGX_PLATFORM_P_BODY },
    NGX_PLATFORM_ANSWER_RAW,

    NULL,
    "Task request not found.",
    "No task request with this id exists.",
    NULL, NULL,
    NGX_HTTP_BAD_REQUEST, "Invalid reference.",
    "samplerId is not a sampler of the tenant.",
    NULL, NULL,
    ngx_platform_task_requests_assign_outcomes
};


/*
 * PATCH toggle-accept-reject. $5 the checked body: status, and the
 * sampler or laboratory that answers, which must be the task's (403).
 * The same status again changes nothing and writes no history, and
 * answers as a change does. samplerOrLaboratoryId is answered as the
 * task holds it (lower case).
 */

static ngx_platform_outcome_t  ngx_platform_task_requests_toggle_outcomes[] = {
    { "not_party", NGX_HTTP_FORBIDDEN, "Access denied.",
      "samplerOrLaboratoryId is neither the sampler nor the laboratory of "
      "this task request." },
    { NULL, 0, NULL, NULL }
};


static ngx_platform_sql_t  ngx_platform_task_requests_toggle = {
    { "platform_task_requests_toggle",

      "WITH v AS MATERIALIZED (SELECT b->>'status' AS status,"
      " (b->>'samplerOrLaboratoryId')::uuid AS party"
      " FROM (SELECT $5::jsonb AS b) p),"
      NGX_PLATFORM_TASK_LOCKED
      " m AS MATERIALIZED (SELECT t.id, t.status, CASE"
      " WHEN t.sampler_id = v.party THEN t.sampler_id"
      " WHEN t.laboratory_id = v.party THEN t.laboratory_id END AS party"
      " FROM t, v),"
      " f AS MATERIALIZED (SELECT CASE"
      " WHEN NOT EXISTS (SELECT 1 FROM m) THEN NULL"
      " WHEN (SELECT m.party FROM m) IS NULL THEN 'not_party'"
      " END AS refusal),"
      " u AS (UPDATE task_requests r SET status = v.status,"
      " updated_at = clock_timestamp()"
      " FROM m, v, f"
      " WHERE r.id = $1::uuid AND r.tenant_id = $2 AND f.refusal IS NULL"
      " AND m.status <> v.status"
      " RETURNING r.id, r.status, r.updated_at, m.status AS previous),"
      NGX_PLATFORM_TASK_HISTORY
      " SELECT (SELECT f.refusal FROM f),"
      " (SELECT row_to_json(x)::text FROM (SELECT"
      " 'Task request status updated.' AS message,"
      " m.id AS \"taskId\", v.status,"
      " m.party AS \"samplerOrLaboratoryId\""
      " FROM m, v) x)",

      5, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT, NGX_PLATFORM_P_COUNTRY,
      NGX_PLATFORM_P_USER, NGX_PLATFORM_P_BODY },
    NGX_PLATFORM_ANSWER_RAW,

    NULL,
    "Task request not found.",
    "No task request with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL,
    ngx_platform_task_requests_toggle_outcomes
};


static char  *ngx_platform_task_requests_priorities[] = {
    "LOW", "MEDIUM", "HIGH", NULL
};

static char  *ngx_platform_task_requests_statuses[] = {
    "ACCEPTED", "REJECTED", "PENDING", NULL
};


/* spec 2.9; lengths in characters */

static ngx_platform_field_t  ngx_platform_task_requests_assign_body[] = {
    { "samplerId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "priority", NGX_PLATFORM_T_ENUM, NGX_PLATFORM_F_REQUIRED,
      0, 0, ngx_platform_task_requests_priorities, NULL, NULL },
    { "dueDate", NGX_PLATFORM_T_DATETIME, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { "description", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 2000, NULL, NULL, NULL },
    { "pickupAddress", NGX_PLATFORM_T_STRING,
      NGX_PLATFORM_F_NULLABLE|NGX_PLATFORM_F_MAX,
      0, 500, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


static ngx_platform_field_t  ngx_platform_task_requests_toggle_body[] = {
    { "status", NGX_PLATFORM_T_ENUM, NGX_PLATFORM_F_REQUIRED,
      0, 0, ngx_platform_task_requests_statuses, NULL, NULL },
    { "samplerOrLaboratoryId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/* the shapes of the data its endpoints answer (docs/api.md) */

static const char  ngx_platform_task_requests_schemas[] =
    "{"
    "\"TaskSamplerAssigned\":{\"type\":\"object\",\"properties\":{"
     "\"message\":{\"type\":\"string\"},"
     "\"taskId\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"samplerId\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"status\":{\"type\":\"string\",\"const\":\"ASSIGNED\"}}},"
    "\"TaskStatusUpdated\":{\"type\":\"object\",\"properties\":{"
     "\"message\":{\"type\":\"string\"},"
     "\"taskId\":{\"type\":\"string\",\"format\":\"uuid\"},"
     "\"status\":{\"type\":\"string\",\"enum\":[\"ACCEPTED\",\"REJECTED\","
     "\"PENDING\"]},"
     "\"samplerOrLaboratoryId\":{\"type\":\"string\","
     "\"format\":\"uuid\"}}}"
    "}";


/*
 * platform_openapi: each endpoint's success data, and an example on the
 * demo data
 */

static ngx_platform_doc_t  ngx_platform_task_requests_assign_doc = {
    "Assign a sampler to a task request",
    ngx_platform_doc_schema("TaskSamplerAssigned"),
    "{\"path\":{\"id\":\"61000000-0000-4000-8000-000000000001\"},"
    "\"headers\":{\"userId\":\"lab-admin-1\"},"
    "\"body\":{\"samplerId\":\"51000000-0000-4000-8000-000000000002\","
    "\"priority\":\"HIGH\",\"dueDate\":\"2099-12-01\","
    "\"pickupAddress\":\"12 Ikorodu Road, Mile 12, Lagos\"}}",
    NULL, 0, NULL
};


static ngx_platform_doc_t  ngx_platform_task_requests_toggle_doc = {
    "Accept or reject a task request",
    ngx_platform_doc_schema("TaskStatusUpdated"),
    "{\"path\":{\"id\":\"61000000-0000-4000-8000-000000000002\"},"
    "\"headers\":{\"userId\":\"sampler-user-1\"},"
    "\"body\":{\"status\":\"ACCEPTED\",\"samplerOrLaboratoryId\":"
    "\"51000000-0000-4000-8000-000000000001\"}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_task_requests_endpoints[] = {

    { NGX_HTTP_PATCH, "/api/v1/task-requests/{uuid}/assign-sampler",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_USER|NGX_PLATFORM_IN_COUNTRY_OPT
      |NGX_PLATFORM_IN_NO_HEAD,
      NULL, ngx_platform_task_requests_assign_body,
      "Invalid task request id.", "The task request id must be a uuid.",
      &ngx_platform_task_requests_assign, NULL,
      &ngx_platform_task_requests_assign_doc },

    { NGX_HTTP_PATCH, "/api/v1/task-requests/{uuid}/toggle-accept-reject",
      NGX_PLATFORM_AUTH_TENANT,
      NGX_PLATFORM_IN_TENANT|NGX_PLATFORM_IN_USER|NGX_PLATFORM_IN_COUNTRY_OPT
      |NGX_PLATFORM_IN_NO_HEAD,
      NULL, ngx_platform_task_requests_toggle_body,
      "Invalid task request id.", "The task request id must be a uuid.",
      &ngx_platform_task_requests_toggle, NULL,
      &ngx_platform_task_requests_toggle_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


ngx_platform_family_t  ngx_platform_task_requests_family = {
    ngx_string("task_requests"),
    NGX_PLATFORM_ENVELOPE_B,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_task_requests_endpoints,
    NULL,
    0,
    ngx_platform_task_requests_schemas,
    NULL
};

