
/*
 * ngx_platform: the registry of endpoint families, one line each.
 *
 * A family named NAME is ngx_platform_NAME_family in its own file (add
 * that file to "config"); its location directive is platform_NAME, and
 * NAME labels its requests in the metrics. Metrics keep their order.
 */


NGX_PLATFORM_FAMILY(otp)
NGX_PLATFORM_FAMILY(products)
NGX_PLATFORM_FAMILY(tms)
NGX_PLATFORM_FAMILY(persons)
NGX_PLATFORM_FAMILY(health)
NGX_PLATFORM_FAMILY(metrics)
NGX_PLATFORM_FAMILY(transfers)
NGX_PLATFORM_FAMILY(invoices)
NGX_PLATFORM_FAMILY(counterparties)
NGX_PLATFORM_FAMILY(task_requests)
NGX_PLATFORM_FAMILY(trades)
NGX_PLATFORM_FAMILY(webhooks)
NGX_PLATFORM_FAMILY(sales)
NGX_PLATFORM_FAMILY(identity)
NGX_PLATFORM_FAMILY(openapi)
