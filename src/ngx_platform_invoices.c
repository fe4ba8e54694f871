
/*
 * ngx_platform: invoice settings (spec 4.3, decisions.md section 3
 * "Invoice tax delete"). Envelope A. The caller's tenant comes from its
 * credentials (by default the bearer token's tenantId); another tenant's
 * tax setting is 404, like an unknown one, and is left alone.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"
#include "ngx_platform_op.h"


/*
 * One statement: the row is deleted and reported only when it is of the
 * caller's tenant, so a 404 changed nothing. The answer is 200 with no
 * body, as the specification shows.
 */

static ngx_platform_sql_t  ngx_platform_invoices_delete_tax = {
    { "platform_invoices_delete_tax",

      "DELETE FROM invoice_tax_settings"
      " WHERE id = $1::uuid AND tenant_id = $2"
      " RETURNING 1",

      2, 0, 0 },

    { NGX_PLATFORM_P_ARG(0), NGX_PLATFORM_P_TENANT },
    NGX_PLATFORM_ANSWER_EMPTY,

    NULL,
    "Tax setting not found.",
    "No tax setting with this id exists.",
    NULL, NULL, 0, NULL, NULL,
    NULL, NULL, NULL
};


static ngx_platform_field_t  ngx_platform_invoices_delete_tax_query[] = {
    { "TaxSettingId", NGX_PLATFORM_T_UUID, NGX_PLATFORM_F_REQUIRED,
      0, 0, NULL, NULL, NULL },
    { NULL, 0, 0, 0, 0, NULL, NULL, NULL }
};


/*
 * platform_openapi: an example on the demo data (the success has no
 * body)
 */

static ngx_platform_doc_t  ngx_platform_invoices_delete_tax_doc = {
    "Delete an invoice tax setting",
    NULL,
    "{\"query\":{\"TaxSettingId\":"
    "\"f1000000-0000-4000-8000-000000000003\"}}",
    NULL, 0, NULL
};


static ngx_platform_endpoint_t  ngx_platform_invoices_endpoints[] = {

    { NGX_HTTP_DELETE, "/api/v{version}/InvoiceSetting/DeleteInvoiceTax",
      NGX_PLATFORM_AUTH_BEARER, NGX_PLATFORM_IN_TENANT,
      ngx_platform_invoices_delete_tax_query, NULL,
      NULL, NULL,
      &ngx_platform_invoices_delete_tax, NULL,
      &ngx_platform_invoices_delete_tax_doc },

    { 0, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
};


static ngx_platform_text_t  ngx_platform_invoices_texts[] = {
    { "Tax setting not found.", "Paramètre de taxe introuvable." },
    { "No tax setting with this id exists.",
      "Aucun paramètre de taxe ne porte cet identifiant." },
    { NULL, NULL }
};


ngx_platform_family_t  ngx_platform_invoices_family = {
    ngx_string("invoices"),
    NGX_PLATFORM_ENVELOPE_A,
    NGX_PLATFORM_BACKEND_PG,
    ngx_platform_invoices_endpoints,
    ngx_platform_invoices_texts,
    0,
    NULL,
    NULL
};
