#!/usr/bin/perl

# POST /api/v{version}/Identity/verification/business-credit-bureau: each
# outcome of the bureau (VERIFIED, NAME_MISMATCH with case and white space
# variants, non-ASCII included, 404, 502 for 5xx, garbage, too large and
# unreachable, 504 for a timeout), the alias companyNumber, every 400, 401,
# French, what is recorded, and the bureau never seeing the client's token.

use strict;
use warnings;
use utf8;

use lib 't/lib';
use Test::More;
use Platform::Test;
use Platform::JWT;
use JSON::PP;

my $t = Platform::Test->new();
my $k = Platform::JWT::keys($t->testdir . '/keys');

my $big = '{"companyName":"Big Limited","address":"' . ('a' x 2000) . '"}';

# the stand-in bureau: an nginx server answering from a few companies, and
# for the slow ones a small Perl server; the module's internal location
# proxies to them (to a closed port for "unreachable")

my $conf = <<'EOF';
    log_format bureau '$arg_rc_number $http_authorization';

    map $arg_rc_number $bureau_addr {
        ~^HANG   127.0.0.1:%%PORT_3%%;
        ~^DOWN   127.0.0.1:%%PORT_4%%;
        default  127.0.0.1:%%PORT_2%%;
    }

    server {
        listen 127.0.0.1:%%PORT%%;

        location /api/ {
            platform_identity;
            platform_identity_bureau /_bureau;
            platform_jwt_key HS256 %%TESTDIR%%/keys/hs256.key;
        }

        location = /_bureau {
            internal;
            proxy_pass http://$bureau_addr/bureau$is_args$args;
            proxy_connect_timeout 1s;
            proxy_read_timeout 1s;
            subrequest_output_buffer_size 1k;
        }
    }

    server {
        listen 127.0.0.1:%%PORT_2%%;
        access_log %%TESTDIR%%/bureau.log bureau;
        default_type application/json;

        location = /bureau {
            rewrite ^ /co/$arg_rc_number last;
        }

        location = /co/RC1001 {
            return 200 '{"companyName":"Acme Trading Limited","address":"12 Marina, Lagos","rcNumber":"RC1001"}';
        }
        location = /co/RC1002 {
            return 200 '{"companyName":"Société Générale Côte d\'Ivoire","address":"5 Avenue Joseph Anoma, Abidjan"}';
        }
        location = /co/RC1003 {
            return 200 '{"companyName":"ΟΔΟΣ ΕΜΠΟΡΙΚΗ ΑΕ","address":"Ermou 10, Athens"}';
        }
        location = /co/RC1004 {
            return 200 '{"companyName":"ООО Ромашка","address":"Tverskaya 1, Moscow"}';
        }
        location = /co/RC1005 {
            return 200 '{"companyName":"Straßenbau GmbH","address":"Hauptstraße 1, Berlin"}';
        }
        location ~ ^/co/RC-7 {
            return 200 '{"companyName":"Slash Dot Limited","address":"1 Path Road"}';
        }
        location = /co/RC500 { return 500 '{"error":"boom"}'; }
        location = /co/RC503 { return 503 '{"error":"busy"}'; }
        location = /co/GARBAGE1 { return 200 'this is not JSON'; }
        location = /co/GARBAGE2 { return 200 '[{"companyName":"x","address":"y"}]'; }
        location = /co/GARBAGE3 { return 200 '{"companyName":7,"address":"y"}'; }
        location = /co/GARBAGE4 { return 200 '{"companyName":"No Address Ltd"}'; }
        location = /co/GARBAGE5 { return 200 '{"companyName":"x","address":"y"'; }
        location = /co/BIG { return 200 '%%BIG%%'; }
        location /co/ { return 404 '{"error":"unknown company"}'; }
    }
EOF
$conf =~ s/%%BIG%%/$big/;
utf8::encode($conf);
$t->run($conf);

# the slow bureau: never answers in time

my $slow = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                 LocalPort => $t->port(3), Listen => 16,
                                 ReuseAddr => 1) or die "listen: $!";
my $slow_pid = fork // die "fork: $!";
if (!$slow_pid) {
    while (my $c = $slow->accept) {
        next if fork;
        sleep 4;
        exit 0;
    }
    exit 0;
}
close $slow;

my $path = '/api/v1/Identity/verification/business-credit-bureau';

sub verify {
    my ($body, %o) = @_;
    my %h = (Authorization => 'Bearer '
             . Platform::JWT::hs256($k, tenantId => $o{tenant} // 'tenant-a',
                                    sub => $o{sub} // 'user-1'),
             %{$o{headers} // {}});
    delete $h{Authorization} if $o{anonymous};
    my %req = (headers => \%h);
    if (ref $body) {
        $req{body} = JSON::PP->new->utf8->canonical->encode($body);
        $h{'Content-Type'} = 'application/json';
    } elsif (defined $body) {
        $req{body} = $body;
        $h{'Content-Type'} = 'application/json';
    }
    return $t->request($o{method} // 'POST', $o{path} // $path, %req);
}

sub envelope_error {
    my ($r, $status, $message, $detail, $name) = @_;
    is($r->{status}, $status, "$name: $status") or diag($r->{content});
    is_deeply($r->{json}, {
        succeeded => JSON::PP::false, message => $message,
        errors => [ $detail ], data => undef,
    }, "$name: Envelope A") or diag($r->{content});
}

sub verified {
    my ($r, $name, $company, $address, $status) = @_;
    is($r->{status}, 200, "$name: 200") or diag($r->{content});
    is_deeply($r->{json}, {
        succeeded => JSON::PP::true,
        message => 'Business verification completed.',
        errors => [],
        data => { companyName => $company, address => $address,
                  verificationStatus => $status },
    }, "$name: $status") or diag($r->{content});
}

sub dec {
    my ($s) = @_;
    utf8::decode($s);
    return $s;
}

sub calls {
    my ($rc) = @_;
    open(my $fh, '<', $t->testdir . '/bureau.log') or return 0;
    return scalar grep { /^\Q$rc\E / } <$fh>;
}

### VERIFIED, NAME_MISMATCH

my $acme = 'Acme Trading Limited';
my $acme_addr = '12 Marina, Lagos';

verified(verify({ rc_number => 'RC1001' }), 'no customer name', $acme,
         $acme_addr, 'VERIFIED');
my $r = verify({ rc_number => 'RC1001', customer_name => $acme });
verified($r, 'the same name', $acme, $acme_addr, 'VERIFIED');
is($r->{headers}{'content-type'}, 'application/json; charset=utf-8',
   'content type');
is($r->{headers}{'content-language'}, 'en', 'Content-Language en');
is(Platform::Test::loose_json($r->{content}), '', 'compact JSON');

verified(verify({ rc_number => 'RC1001',
                  customer_name => "  aCME \t trading\x{a0}\x{2003}LIMITED  " }),
         'case and white space folded', $acme, $acme_addr, 'VERIFIED');
verified(verify({ rc_number => 'RC1001', customer_name => 'Acme Trading Ltd' }),
         'another name', $acme, $acme_addr, 'NAME_MISMATCH');
verified(verify({ rc_number => 'RC1001', customer_name => 'AcmeTrading Limited' }),
         'white space is not dropped', $acme, $acme_addr, 'NAME_MISMATCH');
verified(verify({ rc_number => 'RC1001', customer_name => '' }),
         'an empty name is no name', $acme, $acme_addr, 'VERIFIED');
verified(verify({ rc_number => 'RC1001', customer_name => undef }),
         'a null name is no name', $acme, $acme_addr, 'VERIFIED');

my $sg = "Société Générale Côte d'Ivoire";
my $sg_addr = '5 Avenue Joseph Anoma, Abidjan';
verified(verify({ rc_number => 'RC1002',
                  customer_name => "SOCIÉTÉ   générale CÔTE D'IVOIRE" }),
         'Latin accented letters, folded', $sg, $sg_addr, 'VERIFIED');
verified(verify({ rc_number => 'RC1002',
                  customer_name => "SOCIE\x{301}TE\x{301} Ge\x{301}ne\x{301}rale"
                                   . " Co\x{302}te d'Ivoire" }),
         'decomposed accents', $sg, $sg_addr, 'VERIFIED');
verified(verify({ rc_number => 'RC1002',
                  customer_name => "Societe Generale Cote d'Ivoire" }),
         'accents are not dropped', $sg, $sg_addr, 'NAME_MISMATCH');
verified(verify({ rc_number => 'RC1003', customer_name => 'Οδος Εμπορικη Αε' }),
         'Greek, final sigma', 'ΟΔΟΣ ΕΜΠΟΡΙΚΗ ΑΕ', 'Ermou 10, Athens',
         'VERIFIED');
verified(verify({ rc_number => 'RC1004', customer_name => 'ооо РОМАШКА' }),
         'Cyrillic', 'ООО Ромашка', 'Tverskaya 1, Moscow', 'VERIFIED');
verified(verify({ rc_number => 'RC1004', customer_name => 'ООО Ромашкa' }),
         'a Latin a among Cyrillic letters', 'ООО Ромашка',
         'Tverskaya 1, Moscow', 'NAME_MISMATCH');
verified(verify({ rc_number => 'RC1005', customer_name => 'STRASSENBAU GMBH' }),
         'sharp s', 'Straßenbau GmbH', 'Hauptstraße 1, Berlin', 'VERIFIED');
verified(verify({ rc_number => 'RC1001',
                  customer_name => "\x{ff21}cme Trading Limited" }),
         'full-width letters (NFKC)', $acme, $acme_addr, 'VERIFIED');

### the alias

verified(verify({ companyNumber => 'RC1001' }), 'companyNumber', $acme,
         $acme_addr, 'VERIFIED');
verified(verify({ companyNumber => ' RC1001 ', rc_number => 'RC1001' }),
         'both, the same once trimmed', $acme, $acme_addr, 'VERIFIED');
verified(verify({ companyNumber => undef, rc_number => 'RC1001' }),
         'companyNumber null', $acme, $acme_addr, 'VERIFIED');
verified(verify({ rc_number => 'RC-7/A.1' }), 'slash and dot escaped',
         'Slash Dot Limited', '1 Path Road', 'VERIFIED');
is(calls('RC-7%2FA.1'), 1, 'the bureau got the RC number URL-encoded');

### the bureau's other outcomes

envelope_error(verify({ rc_number => 'RC9999' }), 404, 'Company not found.',
               'The credit bureau knows no company with this RC number.',
               'unknown company');

my $bad = 'The credit bureau could not be reached or gave no valid answer.';
for my $rc (qw(RC500 RC503 GARBAGE1 GARBAGE2 GARBAGE3 GARBAGE4 GARBAGE5 BIG
               DOWN1)) {
    $r = verify({ rc_number => $rc, customer_name => 'x' });
    envelope_error($r, 502, 'Bad gateway.', $bad, $rc);
    unlike($r->{content}, qr/boom|busy|not JSON|aaaa|No Address/,
           "$rc: nothing of the bureau's body");
}

$r = verify({ rc_number => 'HANG1' });
envelope_error($r, 504, 'Gateway timeout.',
               'The credit bureau did not answer in time.', 'bureau timeout');
cmp_ok($r->{time}, '<', 3.5, 'timed out by proxy_read_timeout');

### French

my %fr = (headers => { 'Accept-Language' => 'fr' });
$r = verify({ rc_number => 'RC1001' }, %fr);
is($r->{json}{message}, "Vérification de l'entreprise effectuée.",
   'fr: success message');
is($r->{headers}{'content-language'}, 'fr', 'Content-Language fr');
envelope_error(verify({ rc_number => 'RC9998' }, %fr), 404,
               'Entreprise introuvable.',
               'Le bureau de crédit ne connaît aucune entreprise ayant ce '
               . 'numéro RC.', 'fr: 404');
envelope_error(verify({ rc_number => 'RC500' }, %fr), 502,
               'Passerelle incorrecte.',
               "Le bureau de crédit est injoignable ou n'a pas donné de "
               . 'réponse valide.', 'fr: 502');
envelope_error(verify({ rc_number => 'HANG2' }, %fr), 504,
               'Délai de la passerelle dépassé.',
               "Le bureau de crédit n'a pas répondu à temps.", 'fr: 504');
envelope_error(verify({ customer_name => 'x' }, %fr), 400,
               'Requête invalide.', 'rc_number ou companyNumber est requis.',
               'fr: 400 no RC number');
envelope_error(verify({ rc_number => 'A', companyNumber => 'B' }, %fr), 400,
               'Requête invalide.', 'rc_number et companyNumber diffèrent.',
               'fr: 400 both differ');
envelope_error(verify({ rc_number => 'A&B' }, %fr), 400, 'Requête invalide.',
               'rc_number ne peut contenir que des lettres, des chiffres, '
               . 'des espaces et - / .', 'fr: 400 characters');
envelope_error(verify({ customer_name => "a\x{1}b", rc_number => 'A' }, %fr),
               400, 'Requête invalide.',
               'customer_name ne doit pas contenir de caractères de '
               . 'contrôle.', 'fr: 400 control characters');
envelope_error(verify(undef, %fr, anonymous => 1), 401,
               'Authentification requise.',
               "Un jeton d'accès (Bearer) est requis.", 'fr: 401');

### 400: each field

my $bad_request = 'Bad request.';
envelope_error(verify({}), 400, $bad_request,
               'rc_number or companyNumber is required.', 'empty object');
envelope_error(verify({ rc_number => undef, companyNumber => undef }), 400,
               $bad_request, 'rc_number or companyNumber is required.',
               'both null');
envelope_error(verify({ rc_number => 'RC1001', companyNumber => 'RC1002' }),
               400, $bad_request, 'rc_number and companyNumber differ.',
               'both, different');
envelope_error(verify({ rc_number => 'rc1001', companyNumber => 'RC1001' }),
               400, $bad_request, 'rc_number and companyNumber differ.',
               'both, different in case');
envelope_error(verify({ rc_number => 1001 }), 400, $bad_request,
               'rc_number must be a string.', 'rc_number a number');
envelope_error(verify({ companyNumber => [] }), 400, $bad_request,
               'companyNumber must be a string.', 'companyNumber an array');
envelope_error(verify({ rc_number => "  \t " }), 400, $bad_request,
               'rc_number must be at least 1 character long.',
               'rc_number blank');
envelope_error(verify({ rc_number => 'R' x 65 }), 400, $bad_request,
               'rc_number must be at most 64 characters long.',
               'rc_number too long');
envelope_error(verify({ companyNumber => 'C' x 65 }), 400, $bad_request,
               'companyNumber must be at most 64 characters long.',
               'companyNumber too long');
for my $v ('RC1001?x=1', "RC\x{e9}1", "RC\n1", 'RC%31', 'RC+1') {
    (my $n = $v) =~ s/[^ -~]/?/g;
    envelope_error(verify({ rc_number => $v }), 400, $bad_request,
                   'rc_number may hold only letters, digits, spaces and - / .',
                   "rc_number $n");
}
envelope_error(verify({ companyNumber => 'RC#1' }), 400, $bad_request,
               'companyNumber may hold only letters, digits, spaces and - / .',
               'companyNumber characters');
envelope_error(verify({ rc_number => 'RC1001', customer_name => 5 }), 400,
               $bad_request, 'customer_name must be a string.',
               'customer_name a number');
envelope_error(verify({ rc_number => 'RC1001', customer_name => 'n' x 201 }),
               400, $bad_request,
               'customer_name must be at most 200 characters long.',
               'customer_name too long');
envelope_error(verify({ rc_number => 'RC1001', customer_name => "a\tb\x{7f}" }),
               400, $bad_request,
               'customer_name must not hold control characters.',
               'customer_name with DEL');
envelope_error(verify('[1]'), 400, 'The request body must be a JSON object.',
               'Expected a JSON object.', 'not an object');
is(verify('{"rc_number":')->{status}, 400, 'malformed JSON: 400');

### 401, 405, versions

$r = verify({ rc_number => 'RC1001' }, anonymous => 1);
envelope_error($r, 401, 'Authentication required.',
               'A bearer token is required.', 'no token');
like($r->{headers}{'www-authenticate'}, qr/^Bearer/, 'WWW-Authenticate');
is(verify({ rc_number => 'RC1001' },
          headers => { Authorization => 'Bearer x.y.z' })->{status}, 401,
   'a bad token: 401');
is(verify(undef, method => 'GET')->{status}, 405, 'GET: 405');
is(verify(undef, method => 'HEAD')->{status}, 405, 'HEAD: 405');
verified(verify({ rc_number => 'RC1001' },
                path => '/api/v1.0/Identity/verification/'
                        . 'business-credit-bureau'),
         'version 1.0', $acme, $acme_addr, 'VERIFIED');
is(verify({ rc_number => 'RC1001' },
          path => '/api/v2/Identity/verification/business-credit-bureau')
   ->{status}, 404, 'version 2: 404');

### the bureau's request

my $log = do { local $/; open(my $fh, '<', $t->testdir . '/bureau.log');
               <$fh> };
unlike($log, qr/Bearer/, 'the bureau never sees the client\'s token');

### what is recorded

$t->psql("DELETE FROM identity_verifications");
verify({ rc_number => 'RC1005', customer_name => 'Strasse' },
       tenant => 'tenant-b', sub => 'user-42');
verify({ rc_number => 'RC9997' }, tenant => 'tenant-b', sub => 'user-42');
verify({ rc_number => 'RC500' }, tenant => 'tenant-b', sub => 'user-42');
verify({ rc_number => 'HANG3' }, tenant => 'tenant-b', sub => 'user-42');
is(dec($t->psql(q{SELECT string_agg(concat_ws('|', tenant_id, rc_number,
                  customer_name, status, requested_by,
                  bureau->>'companyName', cached_from IS NULL,
                  created_at > now() - interval '1 minute'), ';' ORDER BY id)
              FROM identity_verifications})),
   'tenant-b|RC1005|Strasse|NAME_MISMATCH|user-42|Straßenbau GmbH|t|t;'
   . 'tenant-b|RC9997|NOT_FOUND|user-42|t|t;'
   . 'tenant-b|RC500|BUREAU_ERROR|user-42|t|t;'
   . 'tenant-b|HANG3|BUREAU_TIMEOUT|user-42|t|t',
   'each outcome recorded: tenant, RC number, name, status, sub, time');
is(dec($t->psql(q{SELECT bureau FROM identity_verifications
                  WHERE rc_number = 'RC1005'})),
   '{"address": "Hauptstraße 1, Berlin", "companyName": "Straßenbau GmbH"}',
   "the bureau's answer as jsonb");

$t->ignore_log(qr/identity: the bureau/);
$t->ignore_log(qr/upstream timed out|Connection refused|connect\(\) failed/);
$t->ignore_log(qr/too big subrequest response/);

kill 'TERM', $slow_pid;
waitpid $slow_pid, 0;

# a location without a bureau: nginx -t passes, and says what it means
my $c = $t->check_config(<<'EOF');
    server {
        listen 127.0.0.1:%%PORT%%;
        location /api/ { platform_identity; platform_auth none; }
    }
EOF
is($c->{ok}, 1, 'no bureau: nginx -t passes') or diag($c->{output});
like($c->{output},
     qr/\[warn\].*platform_identity without platform_identity_bureau/,
     'no bureau: nginx -t warns');

$t->done;
done_testing;
