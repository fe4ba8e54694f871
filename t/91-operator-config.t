#!/usr/bin/perl

# What an operator may put around the module's locations works: "if",
# limit_except, nested locations, internal redirects into and out of a
# module location (rewrite, error_page, try_files with a named location),
# auth_request and mirror. Error log lines written after an internal
# redirect keep nginx's context (client, server, request).

use strict;
use warnings;

use lib 't/lib';
use Test::More;
use Platform::Test;

my $t = Platform::Test->new();

my $order = 'a0000000-0000-4000-8000-000000000091';
my $missing = 'a0000000-0000-4000-8000-000000000099';

(my $conf = <<'EOF') =~ s/%%ORDER%%/$order/g;
    # the TMS routes that default to a bearer token are not used here
    platform_auth tenant;

    # 1: "if" inside module locations
    server {
        listen 127.0.0.1:%%PORT%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            if ($http_origin) { set $cors 1; }
        }

        location = /health {
            platform_health;
            if ($http_origin) { set $cors 1; }
        }
    }

    # 2: limit_except that denies
    server {
        listen 127.0.0.1:%%PORT_2%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            limit_except GET { deny all; }
        }
    }

    # 3: limit_except that lets this client through to the module
    server {
        listen 127.0.0.1:%%PORT_3%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            limit_except GET { allow 127.0.0.1; deny all; }
        }
    }

    # 4: a nested location inside a module location
    server {
        listen 127.0.0.1:%%PORT_4%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            location /tms/delivery-orders/ { }
        }
    }

    # 5: internal redirects into module locations
    server {
        listen 127.0.0.1:%%PORT_5%%;
        server_name op91;

        error_page 404 = /fallback;

        location /alias {
            rewrite ^ /tms/delivery-orders/%%ORDER%% last;
        }

        location /old/ {
            root %%TESTDIR%%/empty;
            error_page 404 = /tms/delivery-orders/%%ORDER%%;
        }

        location /static/ {
            root %%TESTDIR%%/empty;
        }

        location /tms/ { platform_tms; }
        location = /fallback { platform_health; }
    }

    # 6: try_files falling back to a named module location
    server {
        listen 127.0.0.1:%%PORT_6%%;
        server_name op91;

        location /tms/ {
            root %%TESTDIR%%/empty;
            try_files $uri @platform;
        }

        location @platform { platform_tms; }
    }

    # 7 and 8: auth_request in front of a module location
    server {
        listen 127.0.0.1:%%PORT_7%%;
        server_name op91;

        location /tms/ { platform_tms; auth_request /auth; }
        location = /auth { internal; return 204; }
    }

    server {
        listen 127.0.0.1:%%PORT_8%%;
        server_name op91;

        location /tms/ { platform_tms; auth_request /auth; }
        location = /auth { internal; return 401; }
    }

    # 9: mirror on module locations
    server {
        listen 127.0.0.1:%%PORT_9%%;
        server_name op91;

        location /tms/ { platform_tms; mirror /mirror; }
        location = /health { platform_health; mirror /mirror; }
        location = /mirror { internal; return 204; }
    }

    # 10: a module line after a redirect into a module location
    server {
        listen 127.0.0.1:%%PORT_10%%;
        server_name op91;

        location /alias-key {
            rewrite ^ /api/v1/PersonAccounts/x/get last;
        }

        location /api/ { platform_persons; platform_auth apikey; }
    }

    # 11: an error_page out of a module location
    server {
        listen 127.0.0.1:%%PORT_11%%;
        server_name op91;

        location /tms/ { platform_tms; error_page 400 = /gone/; }
        location /gone/ { root %%TESTDIR%%/empty; }
    }

    # 12: an error_page from one module location into another
    server {
        listen 127.0.0.1:%%PORT_12%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            error_page 400 = /api/v1/PersonAccounts/x/get;
        }

        location /api/ { platform_persons; platform_auth apikey; }
    }

    # 13: a nested location that proxies: its errors are the upstream's
    server {
        listen 127.0.0.1:%%PORT_13%%;
        server_name op91;

        location /tms/ {
            platform_tms;
            location /tms/legacy/ { proxy_pass http://127.0.0.1:%%PORT_14%%; }
        }
    }

    server {
        listen 127.0.0.1:%%PORT_14%%;
        location / { return 404 "legacy says no"; }
    }
EOF

$t->run($conf);

$t->psql(<<"SQL");
INSERT INTO delivery_orders (id, tenant_id, country_code, order_number,
                             status, pickup_address, dropoff_address,
                             created_at, updated_at)
VALUES ('$order', 'tenant-a', 'NG', 'DO-9101', 'PENDING', '{}', '{}',
        now(), now());
SQL

my %a = (tenantId => 'tenant-a', countryCode => 'NG');

sub get {
    my ($n, $path, %h) = @_;
    return $t->request('GET', $path, port => $t->port($n),
                       headers => { %a, %h });
}

# the delivery order, answered by the module
sub is_order {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200");
    is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
       "$name: the module's JSON");
    is($r->{json} && $r->{json}{data} && $r->{json}{data}{id}, $order,
       "$name: the delivery order");
}

sub is_health {
    my ($r, $name) = @_;
    is($r->{status}, 200, "$name: 200");
    is($r->{json} && $r->{json}{status}, 'up', "$name: health JSON");
}

# 1: "if" (the worker must not die when it matches)

is_order(get(1, "/tms/delivery-orders/$order"), 'if not matching');
is_health(get(1, '/health'), 'health, if not matching');
is_order(get(1, "/tms/delivery-orders/$order", Origin => 'https://a.test'),
         'if matching');
is_health(get(1, '/health', Origin => 'https://a.test'), 'health, if matching');

my $r = get(1, "/tms/delivery-orders/$missing", Origin => 'https://a.test');
is($r->{status}, 404, 'if matching, unknown order: 404');
is($r->{json} && $r->{json}{statusCode}, 404, 'in Envelope B');

# 2, 3: limit_except

is_order(get(2, "/tms/delivery-orders/$order"), 'limit_except, GET');
$r = $t->request('HEAD', "/tms/delivery-orders/$order", port => $t->port(2),
                 headers => \%a);
is($r->{status}, 200, 'limit_except, HEAD: 200');
$r = $t->request('DELETE', "/tms/delivery-orders/$order", port => $t->port(2),
                 headers => \%a);
is($r->{status}, 403, 'limit_except, DELETE denied');

is_order(get(3, "/tms/delivery-orders/$order"), 'limit_except allow, GET');
$r = $t->request('DELETE', "/tms/delivery-orders/$order", port => $t->port(3),
                 headers => \%a);
is($r->{status}, 405, 'limit_except allow, DELETE reaches the module: 405');
is($r->{json} && $r->{json}{statusCode}, 405, 'in Envelope B');
like($r->{headers}{allow} // '', qr/\bGET\b/, 'with Allow');

# 4: nested location

is_order(get(4, "/tms/delivery-orders/$order"), 'nested location');
$r = get(4, "/tms/delivery-orders/$missing");
is($r->{status}, 404, 'nested location, unknown order: 404');
is($r->{json} && $r->{json}{statusCode}, 404, 'in Envelope B');
$r = get(4, '/tms/nothing-here');
is($r->{status}, 404, 'outer location, unknown path: 404');
is($r->{json} && $r->{json}{statusCode}, 404, 'in Envelope B');

# 5: redirects into module locations

is_order(get(5, '/alias'), 'rewrite into a module location');
is_order(get(5, '/old/page.html'), 'error_page into a module location');
is_health(get(5, '/static/missing.html'),
          'server-level error_page 404 = /fallback, served by the module');

$r = get(5, "/tms/delivery-orders/$missing");
is($r->{status}, 404, 'the module\'s own 404 under error_page 404');
is($r->{json} && $r->{json}{message}, 'Delivery order not found.',
   'is the module\'s envelope, not the fallback')
    or diag($r->{content});

# 6: try_files and a named location

is_order(get(6, "/tms/delivery-orders/$order"), 'try_files @platform');
$r = get(6, "/tms/delivery-orders/$missing");
is($r->{status}, 404, 'try_files @platform, unknown order: 404');
is($r->{json} && $r->{json}{statusCode}, 404, 'in Envelope B');

# 7, 8: auth_request

is_order(get(7, "/tms/delivery-orders/$order"), 'auth_request 204');
$r = get(8, "/tms/delivery-orders/$order");
is($r->{status}, 401, 'auth_request 401 stops the request');

# 9: mirror

is_order(get(9, "/tms/delivery-orders/$order"), 'mirror');
is_order(get(9, "/tms/delivery-orders/$order"), 'mirror, again');
is_health(get(9, '/health'), 'mirror on health');

# 10: a line the module logs after a redirect into its location

$r = get(10, '/alias-key', apiKey => 'not-a-key');
is($r->{status}, 401, 'redirected into an apikey location: 401');

ok($t->wait_until(sub { $t->error_log =~ /API key refused.*alias-key/ }, 3),
   'its line is logged');

# 11: a malformed chunked body, with error_page 400 out of the module's
# location: whether the module answers or the redirect happens, a line
# logged after the redirect has its request

sub bad_chunked {
    my ($n, $extra) = @_;
    my $raw = $t->raw_request(
        "GET /tms/delivery-orders/$order HTTP/1.1\r\nHost: op91\r\n"
        . "tenantId: tenant-a\r\ncountryCode: NG\r\n" . ($extra // '')
        . "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        . "zz\r\n{}\r\n0\r\n\r\n", port => $t->port($n));
    return $t->parse_response($raw);
}

$r = bad_chunked(11);
ok(defined $r->{status}, 'error_page out of a module location: answered '
   . ($r->{status} // 'nothing'));

# 12: the same into another module location, which logs a line

$r = bad_chunked(12, "apiKey: not-a-key\r\n");
ok(defined $r->{status}, 'error_page from one module location into '
   . 'another: answered ' . ($r->{status} // 'nothing'));

# 13: a proxied error response keeps its own body
$r = get(13, '/tms/legacy/x');
is($r->{status}, 404, 'a proxied 404 in a nested location');
is($r->{content}, 'legacy says no', 'keeps the upstream\'s body');
is_order(get(13, "/tms/delivery-orders/$order"),
         'the module beside the proxying nested location');

# the context of every line of those requests

my @lines = grep { /open\(\)|is not found|API key refused/ }
            split /\n/, $t->error_log;
ok(scalar @lines, 'lines to look at');

for my $line (@lines) {
    like($line, qr/, client: 127\.0\.0\.1, server: op91, request: "/,
         'keeps client, server and request: '
         . (grep { defined }
            $line =~ m{"[^"]*/([^/"]+/[^/"]+)"|(API key refused: \w+)})[0]);
}

$t->done;
done_testing;
