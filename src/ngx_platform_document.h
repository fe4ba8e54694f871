
/*
 * ngx_platform: a read of one JSON document, built by PostgreSQL.
 */


#ifndef _NGX_PLATFORM_DOCUMENT_H_INCLUDED_
#define _NGX_PLATFORM_DOCUMENT_H_INCLUDED_


#include "ngx_platform.h"
#include "ngx_platform_pg.h"


/*
 * The statement's single column of at most one row: 200 with the
 * document in the family's envelope, else 404.
 */
typedef struct {
    ngx_platform_pg_stmt_t     stmt;
    char                      *found;           /* the 200 message */
    char                      *missing;         /* the 404 message */
    char                      *missing_detail;
} ngx_platform_pg_document_t;

/* for a route handler to return: NGX_DONE, or the error it sent */
ngx_int_t ngx_platform_pg_document(ngx_http_request_t *r,
    ngx_platform_pg_document_t *doc, ngx_str_t *params);


#endif /* _NGX_PLATFORM_DOCUMENT_H_INCLUDED_ */
