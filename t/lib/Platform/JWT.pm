package Platform::JWT;

=head1 NAME

Platform::JWT - keys and signed tokens (JWS compact form) for the tests

=head1 SYNOPSIS

    use lib 't/lib';
    use Platform::JWT;

    my $k = Platform::JWT::keys($t->testdir . '/keys');

    my $token = Platform::JWT::sign(
        alg    => 'HS256',
        key    => Platform::JWT::secret($k->{hs256}),
        claims => { sub => 'user-1', tenantId => 'tenant-a',
                    exp => time + 300 },
    );

    my $rs = Platform::JWT::sign(alg => 'RS256', key => $k->{rsa},
                                 header => { kid => 'rsa-1' },
                                 claims => { ... });

=head1 DESCRIPTION

Core Perl only: HMAC with L<Digest::SHA>, base64url with L<MIME::Base64>,
JSON with L<JSON::PP>, the ECDSA C<n - s> with L<Math::BigInt>; RSA and EC
keys are made and used with the C<openssl> command (C<genpkey>, C<pkey>,
C<dgst -sign>).

ECDSA signatures come with a low C<s> (at most C<n / 2>, C<n> the order of
the curve), the one spelling of the two that verify which the module takes.

=head1 FUNCTIONS

=over

=item Platform::JWT::keys($dir)

Creates C<$dir> when needed and generates into it, once (a second call with
the same directory only returns the paths), the key files below. Returns a
hashref of their paths:

    hs256        HS256 secret: 48 printable bytes and a newline
    hs256_other  a second HS256 secret, same form
    hs384        HS384 secret: 64 printable bytes and a newline
    hs512        HS512 secret: 80 printable bytes and a newline
    rsa          RSA 2048 private key (PEM)
    rsa_pub      its public key (PEM, "BEGIN PUBLIC KEY")
    rsa2         a second RSA 2048 private key
    rsa2_pub     its public key
    ec           EC P-256 private key (PEM)
    ec_pub       its public key
    ec384        EC P-384 private key (PEM), for ES384
    ec384_pub    its public key
    ec521        EC P-521 private key (PEM), for ES512
    ec521_pub    its public key
    jwks         a JWKS: {"keys": [RSA kid "rsa-1" (alg RS256, use sig,
                 n/e of rsa_pub), EC kid "ec-1" (crv P-256, x/y of ec_pub,
                 no alg: the module infers ES256), oct kid "hs-1" (alg
                 HS256, k = the hs256 secret as secret() reads it)]}

Files are world-readable (nginx reads them while it parses its
configuration).

=item Platform::JWT::sign(%opts)

Returns a token C<header.claims.signature> (each part base64url without
padding). Options:

=over

=item alg

C<HS256>, C<HS384>, C<HS512>, C<RS256>, C<RS384>, C<RS512>, C<ES256>,
C<ES384>, C<ES512> or C<none>. Put into the header as C<alg> and used to
sign. C<none> (any case) gives an unsigned token C<header.claims.> unless
C<signing_alg> says otherwise.

=item key

For HS*: the secret bytes (see C<secret>). For RS* and ES*: the path of a
PEM private key.

=item header

A hashref merged over C<< { alg => $alg, typ => 'JWT' } >>; a member whose
value is undef is removed (C<< header => { alg => undef } >>: no alg;
C<< header => { alg => 'HS384' } >>: claim HS384 while signing with
C<alg>). Add C<kid> here.

=item claims

A hashref: the payload. Encoded with sorted keys.

=item signing_alg

The algorithm that really computes the signature, when it must differ from
the header's (default: C<alg>). For "signed with a key of another type".

=item header_json, claims_json

Raw JSON text (bytes) used instead of encoding C<header> / C<claims>: for
payloads that are not objects or not JSON at all.

=item header_b64, claims_b64, signature_b64

Raw parts used exactly as given (no encoding). The signature is still
computed over the parts actually used unless C<signature_b64> is given.

=item high_s

True: an ES* signature gets the other C<s> that verifies, C<n - s>, above
C<n / 2>.

=item spare_bits

A part's name (C<header>, C<claims>, C<signature>) or an arrayref of them:
the part gets the lowest unused bit of its last character set (see
C<spare_bits> below). The signature is computed over the parts so changed.

=back

=item Platform::JWT::secret($path)

The content of a secret file minus one trailing newline: the bytes the
module uses as the HMAC key.

=item Platform::JWT::b64url($bytes), Platform::JWT::b64url_decode($text)

Base64url without padding, and back.

=item Platform::JWT::spare_bits($part [, $value])

The base64url C<$part> with the unused low bits of its last character (4
at a length of 4k + 2, 2 at 4k + 3) set to C<$value> (default 1, the
lowest): it decodes to the same bytes with a lenient decoder. A part of a
length that is a multiple of 4 has no such bits: croaks.

=item Platform::JWT::ecdsa_twin($alg, $signature_b64)

The ES* signature (base64url) with C<s> replaced by C<n - s>: the other
signature of the same input and key.

=item Platform::JWT::split_token($token)

C<($header, $claims)> decoded from a token (hashrefs), for tests that
rebuild a token from another.

=back

=cut

use strict;
use warnings;

use Carp qw(croak);
use Digest::SHA ();
use File::Temp ();
use JSON::PP ();
use Math::BigInt ();
use MIME::Base64 ();
use POSIX ();
use Platform::Test ();

my $json = JSON::PP->new->canonical->utf8;

my %hmac = (
    HS256 => \&Digest::SHA::hmac_sha256,
    HS384 => \&Digest::SHA::hmac_sha384,
    HS512 => \&Digest::SHA::hmac_sha512,
);

my %digest = (256 => 'sha256', 384 => 'sha384', 512 => 'sha512');

# size in bytes of r and s of ECDSA on the curve of each ES algorithm
my %ec_size = (ES256 => 32, ES384 => 48, ES512 => 66);

# the order n of each curve (P-256, P-384, P-521)
my %ec_order = (
    ES256 => 'ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551',
    ES384 => 'ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf'
           . '581a0db248b0a77aecec196accc52973',
    ES512 => '01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'
           . 'fffa51868783bf2f966b7fcc0148f709a5d03bb5c9b8899c47aebb6fb71e9138'
           . '6409',
);

my @b64url = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', '-', '_');
my %b64url = map { $b64url[$_] => $_ } 0 .. $#b64url;

sub b64url {
    my ($bytes) = @_;
    my $s = MIME::Base64::encode_base64($bytes, '');
    $s =~ tr{+/}{-_};
    $s =~ s/=+$//;
    return $s;
}

sub b64url_decode {
    my ($s) = @_;
    $s =~ tr{-_}{+/};
    $s .= '=' x ((4 - length($s) % 4) % 4);
    return MIME::Base64::decode_base64($s);
}

sub secret {
    my ($path) = @_;
    my $data = _slurp($path) // croak "read $path: $!";
    $data =~ s/\n\z//;
    return $data;
}

sub spare_bits {
    my ($part, $value) = @_;
    $value //= 1;
    my $mask = { 2 => 0x0f, 3 => 0x03 }->{length($part) % 4}
        // croak 'spare_bits: no unused bits in a part of length '
                 . length $part;
    croak "spare_bits: $value is not 1 to $mask"
        unless $value >= 1 && $value <= $mask;
    my $v = $b64url{substr($part, -1)} // croak 'spare_bits: not base64url';
    croak 'spare_bits: set already' if $v & $mask;
    return substr($part, 0, -1) . $b64url[$v | $value];
}

sub ecdsa_twin {
    my ($alg, $sig64) = @_;
    return b64url(_ecdsa_twin($alg, b64url_decode($sig64)));
}

sub split_token {
    my ($token) = @_;
    my ($h, $c) = split /\./, $token;
    return ($json->decode(b64url_decode($h)), $json->decode(b64url_decode($c)));
}

### keys

sub keys {
    my ($dir) = @_;
    my %p = (
        hs256       => "$dir/hs256.key",
        hs256_other => "$dir/hs256-other.key",
        hs384       => "$dir/hs384.key",
        hs512       => "$dir/hs512.key",
        rsa         => "$dir/rsa.pem",
        rsa_pub     => "$dir/rsa.pub",
        rsa2        => "$dir/rsa2.pem",
        rsa2_pub    => "$dir/rsa2.pub",
        ec          => "$dir/ec.pem",
        ec_pub      => "$dir/ec.pub",
        ec384       => "$dir/ec384.pem",
        ec384_pub   => "$dir/ec384.pub",
        ec521       => "$dir/ec521.pem",
        ec521_pub   => "$dir/ec521.pub",
        jwks        => "$dir/jwks.json",
    );

    # the JWKS is written last: its presence means the set is complete
    return \%p if -s $p{jwks};

    if (!-d $dir) {
        mkdir $dir or croak "mkdir $dir: $!";
    }
    chmod 0755, $dir;

    _spew($p{hs256}, _printable(48) . "\n");
    _spew($p{hs256_other}, _printable(48) . "\n");
    _spew($p{hs384}, _printable(64) . "\n");
    _spew($p{hs512}, _printable(80) . "\n");

    for my $name (qw(rsa rsa2)) {
        _openssl('genpkey', '-algorithm', 'RSA',
                 '-pkeyopt', 'rsa_keygen_bits:2048', '-out', $p{$name});
        _openssl('pkey', '-in', $p{$name}, '-pubout', '-out', $p{"${name}_pub"});
    }
    for ([ ec => 'P-256' ], [ ec384 => 'P-384' ], [ ec521 => 'P-521' ]) {
        my ($name, $curve) = @$_;
        _openssl('genpkey', '-algorithm', 'EC',
                 '-pkeyopt', "ec_paramgen_curve:$curve",
                 '-pkeyopt', 'ec_param_enc:named_curve', '-out', $p{$name});
        _openssl('pkey', '-in', $p{$name}, '-pubout',
                 '-out', $p{"${name}_pub"});
    }

    chmod 0644, grep { $_ ne $p{jwks} } values %p;

    my ($n, $e) = rsa_public_numbers($p{rsa_pub});
    my ($x, $y) = ec_public_point($p{ec_pub});

    my $jwks = {
        keys => [
            { kty => 'RSA', kid => 'rsa-1', alg => 'RS256', use => 'sig',
              n => b64url($n), e => b64url($e) },
            { kty => 'EC', kid => 'ec-1', crv => 'P-256',
              x => b64url($x), y => b64url($y) },
            { kty => 'oct', kid => 'hs-1', alg => 'HS256',
              k => b64url(secret($p{hs256})) },
        ],
    };
    my $tmp = "$p{jwks}.tmp";
    _spew($tmp, JSON::PP->new->canonical->pretty->encode($jwks));
    chmod 0644, $tmp;
    rename $tmp, $p{jwks} or croak "rename $tmp: $!";

    return \%p;
}

# (modulus, exponent) of a PEM RSA public key, as big-endian bytes without
# leading zeros
sub rsa_public_numbers {
    my ($pub) = @_;
    my $mod = _openssl('rsa', '-pubin', '-in', $pub, '-modulus', '-noout');
    my ($hex) = $mod =~ /Modulus=([0-9A-Fa-f]+)/
        or croak "no modulus in: $mod";
    my $text = _openssl('pkey', '-pubin', '-in', $pub, '-text', '-noout');
    my ($e) = $text =~ /Exponent:\s*(\d+)/ or croak "no exponent in: $text";
    my $ehex = sprintf('%x', $e);
    $ehex = "0$ehex" if length($ehex) % 2;
    my $n = pack('H*', $hex);
    $n =~ s/^\0+//;
    return ($n, pack('H*', $ehex));
}

# (x, y) of a PEM EC public key: the uncompressed point 04||x||y ends the
# DER SubjectPublicKeyInfo
sub ec_public_point {
    my ($pub) = @_;
    my $der = _openssl('pkey', '-pubin', '-in', $pub, '-outform', 'DER');
    my $text = _openssl('pkey', '-pubin', '-in', $pub, '-text', '-noout');
    my $size = $text =~ /P-384|secp384r1/ ? 48
             : $text =~ /P-521|secp521r1/ ? 66 : 32;
    my $point = substr($der, -(2 * $size + 1));
    croak "not an uncompressed point" unless substr($point, 0, 1) eq "\x04";
    return (substr($point, 1, $size), substr($point, 1 + $size, $size));
}

### tokens

sub sign {
    my (%o) = @_;
    my $alg = $o{alg} // croak 'sign: alg is required';

    my %header = (alg => $alg, typ => 'JWT', %{$o{header} // {}});
    delete @header{grep { !defined $header{$_} } CORE::keys %header};

    my $h64 = $o{header_b64}
        // b64url($o{header_json} // $json->encode(\%header));
    my $c64 = $o{claims_b64}
        // b64url($o{claims_json} // $json->encode($o{claims} // {}));

    my %spare = map { $_ => 1 }
        ref $o{spare_bits} ? @{$o{spare_bits}} : ($o{spare_bits} // ());
    $h64 = spare_bits($h64) if delete $spare{header};
    $c64 = spare_bits($c64) if delete $spare{claims};

    my $input = "$h64.$c64";
    my $s64 = $o{signature_b64};

    if (!defined $s64) {
        my $how = $o{signing_alg} // $alg;
        return "$input." if lc $how eq 'none';

        my $sig = signature($how, $o{key}, $input);
        $sig = _ecdsa_twin($how, $sig) if $o{high_s};
        $s64 = b64url($sig);
    }

    $s64 = spare_bits($s64) if delete $spare{signature};
    croak 'sign: spare_bits of an unknown part: '
        . join(', ', CORE::keys %spare) if %spare;

    return "$input.$s64";
}

# hs256($keys, %claims): a valid HS256 token of the keys' secret for
# tenant-a, user-1, expiring in ten minutes; claims given replace those
sub hs256 {
    my ($keys, %claims) = @_;
    return sign(alg => 'HS256', key => secret($keys->{hs256}),
                claims => { sub => 'user-1', tenantId => 'tenant-a',
                            exp => int(time) + 600, %claims });
}

# signature($alg, $key, $input): raw signature bytes
sub signature {
    my ($alg, $key, $input) = @_;
    croak "sign: key is required for $alg" unless defined $key;

    if (my $f = $hmac{$alg}) {
        return $f->($input, $key);
    }

    my ($kind, $bits) = $alg =~ /^(RS|ES)(256|384|512)$/
        or croak "sign: unknown algorithm $alg";

    my $tmp = File::Temp->new;
    binmode $tmp;
    print $tmp $input;
    close $tmp;
    my $sig = _openssl('dgst', "-$digest{$bits}", '-sign', $key,
                       $tmp->filename);
    return $sig if $kind eq 'RS';
    $sig = _ecdsa_der_to_raw($sig, $ec_size{$alg});

    # openssl leaves s as it comes, above n / 2 half of the time
    return _ecdsa_high_s($alg, $sig) ? _ecdsa_twin($alg, $sig) : $sig;
}

sub _ecdsa_s {
    my ($alg, $sig) = @_;
    my $size = $ec_size{$alg} // croak "not an ECDSA algorithm: $alg";
    croak "$alg signature of " . length($sig) . ' bytes'
        unless length $sig == 2 * $size;
    return Math::BigInt->from_hex(unpack 'H*', substr($sig, $size));
}

# s > n / 2, n odd
sub _ecdsa_high_s {
    my ($alg, $sig) = @_;
    return _ecdsa_s($alg, $sig) * 2 > Math::BigInt->from_hex($ec_order{$alg});
}

# r || s to r || n - s
sub _ecdsa_twin {
    my ($alg, $sig) = @_;
    my $size = $ec_size{$alg};
    my $t = Math::BigInt->from_hex($ec_order{$alg}) - _ecdsa_s($alg, $sig);
    my $hex = substr($t->as_hex, 2);
    $hex = "0$hex" if length($hex) % 2;
    my $bytes = pack 'H*', $hex;
    return substr($sig, 0, $size) . ("\0" x ($size - length $bytes)) . $bytes;
}

# ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } to r||s, each
# left-padded to $size bytes
sub _ecdsa_der_to_raw {
    my ($der, $size) = @_;
    my $pos = 0;
    my $tag = ord substr($der, $pos++, 1);
    croak 'ECDSA signature: not a SEQUENCE' unless $tag == 0x30;
    _der_length($der, \$pos);
    my @ints;
    for (1 .. 2) {
        croak 'ECDSA signature: not an INTEGER'
            unless ord(substr($der, $pos++, 1)) == 0x02;
        my $len = _der_length($der, \$pos);
        my $v = substr($der, $pos, $len);
        $pos += $len;
        $v =~ s/^\0+//;
        croak 'ECDSA signature: integer too long' if length $v > $size;
        push @ints, ("\0" x ($size - length $v)) . $v;
    }
    return join '', @ints;
}

sub _der_length {
    my ($der, $pos) = @_;
    my $b = ord substr($der, $$pos++, 1);
    return $b if $b < 0x80;
    my $n = $b & 0x7f;
    my $len = 0;
    $len = ($len << 8) | ord(substr($der, $$pos++, 1)) for 1 .. $n;
    return $len;
}

### helpers

sub _printable {
    my ($n) = @_;
    my @c = ('A' .. 'Z', 'a' .. 'z', '0' .. '9', split //, '!#%+-./=?@^_~');
    return join '', map { $c[int rand @c] } 1 .. $n;
}

# runs openssl with the arguments (no shell); returns its stdout, dies with
# its stderr on failure
sub _openssl {
    my (@args) = @_;
    my $err = File::Temp->new;
    my $pid = open(my $fh, '-|') // croak "fork: $!";
    if ($pid == 0) {
        open STDERR, '>', $err->filename or POSIX::_exit(1);
        open STDIN, '<', '/dev/null';
        exec('openssl', @args) or do {
            print STDERR "exec openssl: $!\n";
            POSIX::_exit(127);
        };
    }
    binmode $fh;
    local $/;
    my $out = <$fh> // '';
    close $fh;
    if ($? != 0) {
        my $msg = _slurp($err->filename) // '';
        croak "openssl @args: $msg";
    }
    return $out;
}

# the harness's file helpers
sub _slurp { Platform::Test::_slurp(@_) }
sub _spew { Platform::Test::_spew(@_) }

1;
