
/*
 * ngx_platform: a file that a directive names (a token key, a key set, a
 * webhook's secrets), read whole when the configuration is loaded, so
 * that nginx -t checks it and a worker never opens it.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_platform.h"


/*
 * The file's bytes, NUL-ended, in the configuration's pool; a file over
 * max bytes is not what the directive wants ("not a key file"), and is
 * refused before it is read.
 */

char *
ngx_platform_conf_read_file(ngx_conf_t *cf, ngx_str_t *name, size_t max,
    const char *what, ngx_str_t *content)
{
    char             *rv;
    ssize_t           n;
    ngx_fd_t          fd;
    ngx_file_t        file;
    ngx_file_info_t   fi;

    fd = ngx_open_file(name->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_open_file_n " \"%V\" failed", name);
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&file, sizeof(ngx_file_t));

    file.fd = fd;
    file.name = *name;
    file.log = cf->log;

    rv = NGX_CONF_ERROR;

    if (ngx_fd_info(fd, &fi) == NGX_FILE_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           ngx_fd_info_n " \"%V\" failed", name);
        goto done;
    }

    if ((size_t) ngx_file_size(&fi) > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" is larger than %uzk: not %s", name,
                           max / 1024, what);
        goto done;
    }

    content->len = ngx_file_size(&fi);
    content->data = ngx_pnalloc(cf->pool, content->len + 1);
    if (content->data == NULL) {
        goto done;
    }

    n = ngx_read_file(&file, content->data, content->len, 0);
    if (n == NGX_ERROR || (size_t) n != content->len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "cannot read \"%V\"", name);
        goto done;
    }

    content->data[content->len] = '\0';
    rv = NGX_CONF_OK;

done:

    (void) ngx_close_file(fd);

    return rv;
}
