
/*
 * ngx_platform: work that would hold the event loop (a large body's
 * parse, a document's decoding, a large webhook's signatures) runs in
 * the thread pool of platform_thread_pool.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_platform.h"


/*
 * The thread pool of platform_thread_pool, when the module has one, runs
 * work; done follows in the worker. The request is held (counted) and
 * blocked, so that neither a client that goes away nor a worker that
 * exits frees the memory the thread writes.
 */

#if (NGX_THREADS)

/*
 * A worker that shuts down gracefully exits once no timer of its own is
 * left: hold, a timer that is not cancelable, keeps it for the task, so
 * that the request is answered and its connection closed first.
 */
#define NGX_PLATFORM_TASK_HOLD  60000

typedef struct {
    ngx_http_request_t        *request;
    ngx_platform_work_pt       work;
    void                      *data;
    ngx_platform_handler_pt    done;
    ngx_event_t                hold;
} ngx_platform_task_t;


static void
ngx_platform_task_handler(void *data, ngx_log_t *log)
{
    ngx_platform_task_t *t = data;

    t->work(t->data);
}


static void
ngx_platform_task_hold(ngx_event_t *ev)
{
    ngx_add_timer(ev, NGX_PLATFORM_TASK_HOLD);
}


static void
ngx_platform_task_done(ngx_event_t *ev)
{
    ngx_platform_task_t *t = ev->data;

    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = t->request;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    if (t->hold.timer_set) {
        ngx_del_timer(&t->hold);
    }

    r->main->blocked--;

    if (c->error) {
        /* the client went away meanwhile: nginx may now free it all */
        ngx_http_finalize_request(r, NGX_HTTP_CLIENT_CLOSED_REQUEST);
        ngx_http_run_posted_requests(c);
        return;
    }

    /* NGX_DONE: a backend took its own count, the thread's is dropped */

    ngx_platform_finalize(r, t->done(r, ngx_platform_get_ctx(r)));

    ngx_http_run_posted_requests(c);
}

#endif


ngx_int_t
ngx_platform_offload(ngx_http_request_t *r, ngx_platform_work_pt work,
    void *data, ngx_platform_handler_pt done)
{
#if (NGX_THREADS)
    ngx_thread_task_t         *task;
    ngx_platform_task_t       *t;
    ngx_platform_main_conf_t  *pmcf;

    pmcf = ngx_http_get_module_main_conf(r, ngx_platform_module);

    if (pmcf->thread_pool) {
        task = ngx_thread_task_alloc(r->pool, sizeof(ngx_platform_task_t));
        if (task == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        t = task->ctx;

        t->request = r;
        t->work = work;
        t->data = data;
        t->done = done;

        task->handler = ngx_platform_task_handler;
        task->event.data = t;
        task->event.handler = ngx_platform_task_done;

        if (ngx_thread_task_post(pmcf->thread_pool, task) != NGX_OK) {
            /* the pool's queue is full: the worker is overloaded */
            return ngx_platform_fail(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                     "Service temporarily unavailable.",
                                     "The server is busy; retry shortly.");
        }

        t->hold.handler = ngx_platform_task_hold;
        t->hold.data = t;
        t->hold.log = r->connection->log;
        ngx_add_timer(&t->hold, NGX_PLATFORM_TASK_HOLD);

        r->main->blocked++;
        r->main->count++;

        r->read_event_handler = ngx_platform_check_broken_connection;

        return NGX_DONE;
    }
#endif

    work(data);

    return done(r, ngx_platform_get_ctx(r));
}
