# shellcheck shell=bash
# Shell helpers shared by scripts/dev and scripts/test (sourced, not run).
#
# PostgreSQL refuses to run as root. When these scripts run as root, initdb,
# pg_ctl and postgres run as the unprivileged "postgres" user (created by the
# postgresql package; created here as a system user if missing), and the data
# directory belongs to that user.

# pg_bindir: the directory holding initdb and pg_ctl
# (PLATFORM_PG_BINDIR, else the newest /usr/lib/postgresql/N/bin).
pg_bindir() {
    local d
    if [ -n "${PLATFORM_PG_BINDIR:-}" ]; then
        echo "$PLATFORM_PG_BINDIR"
        return
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [ -n "$d" ] && [ -x "$d/initdb" ]; then
            echo "$d"
            return
        fi
    fi
    for d in $(printf "%s\n" /usr/lib/postgresql/*/bin | sort -V -r); do
        if [ -x "$d/initdb" ]; then
            echo "$d"
            return
        fi
    done
    echo "no PostgreSQL server binaries found (run scripts/setup)" >&2
    return 1
}

is_root() {
    [ "$(id -u)" -eq 0 ]
}

# pg_os_user: the OS user that runs PostgreSQL.
pg_os_user() {
    if is_root; then echo postgres; else id -un; fi
}

ensure_pg_os_user() {
    is_root || return 0
    if ! id postgres >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home \
            --home-dir /nonexistent --shell /usr/sbin/nologin postgres
    fi
}

# as_pg CMD...: run a command as the PostgreSQL OS user.
as_pg() {
    if is_root; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# check_pg_access DIR: the PostgreSQL OS user must be able to reach DIR.
check_pg_access() {
    local dir=$1
    is_root || return 0
    local p=/ part blocked=
    for part in $(echo "$dir" | tr '/' ' '); do
        p=${p%/}/$part
        [ -e "$p" ] || break
        if ! runuser -u postgres -- test -x "$p"; then
            blocked=$p
            break
        fi
    done
    [ -z "$blocked" ] && return 0
    cat >&2 <<MSG
error: PostgreSQL refuses to run as root, so it runs as the "postgres" user,
but that user cannot enter $blocked (no search permission: ls -ld $blocked),
so it cannot reach $dir.
Either make the path traversable (chmod o+x $blocked) or keep the state
elsewhere, for instance PLATFORM_DEV_DIR=/tmp/platform-dev.
MSG
    return 1
}

# free_port: print a TCP port on 127.0.0.1 that is free right now.
free_port() {
    perl -MIO::Socket::INET -e '
        my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1",
                                      LocalPort => 0, Listen => 1,
                                      ReuseAddr => 1) or die "socket: $!\n";
        print $s->sockport, "\n";'
}

# port_open PORT: true if something accepts on 127.0.0.1:PORT.
port_open() {
    perl -MIO::Socket::INET -e '
        exit(IO::Socket::INET->new(PeerAddr => "127.0.0.1",
                                   PeerPort => $ARGV[0],
                                   Timeout => 1) ? 0 : 1)' "$1"
}

# wait_for SECONDS CMD...: poll CMD every 50 ms until it succeeds.
wait_for() {
    local limit=$1 i=0
    shift
    while ! "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -ge $((limit * 20)) ]; then
            return 1
        fi
        sleep 0.05
    done
}

# pid_alive PIDFILE: true if the pid file names a running process.
pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(head -n1 "$1")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# pg_init DATADIR: initdb (superuser "postgres", trust auth) if needed.
pg_init() {
    local data=$1 bindir
    bindir=$(pg_bindir)
    [ -f "$data/PG_VERSION" ] && return 0
    mkdir -p "$data"
    if is_root; then
        chown postgres: "$data"
    fi
    chmod 700 "$data"
    as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust \
        --encoding=UTF8 --locale=C.UTF-8 >"$data.initdb.log" 2>&1 || {
        cat "$data.initdb.log" >&2
        return 1
    }
}

# pg_start DATADIR PORT SOCKDIR LOGFILE [extra postgres options]
pg_start() {
    local data=$1 port=$2 sock=$3 log=$4 bindir
    shift 4
    bindir=$(pg_bindir)
    mkdir -p "$sock"
    touch "$log"
    if is_root; then
        chown postgres: "$sock" "$log"
    fi
    as_pg "$bindir/pg_ctl" -D "$data" -l "$log" -w -t 30 -s start \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$sock $*" || {
        tail -20 "$log" >&2
        return 1
    }
}

# pg_stop DATADIR [MODE]: fast by default
pg_stop() {
    local data=$1 mode=${2:-fast} bindir
    bindir=$(pg_bindir)
    as_pg "$bindir/pg_ctl" -D "$data" -w -t 30 -s -m "$mode" stop
}

# pg_running DATADIR
pg_running() {
    local data=$1 bindir
    [ -f "$data/postmaster.pid" ] || return 1
    bindir=$(pg_bindir)
    as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

# redis_start PORT DIR [ARGS...]: a redis-server without persistence, pid and
# log in DIR, ARGS added to its command line.
# Bounded as docs/operators-guide.md tells operators to bound theirs:
# maxmemory with volatile-lru, since every key the module writes expires.
redis_start() {
    local port=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
        --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
        --save '' --appendonly no \
        --maxmemory 256mb --maxmemory-policy volatile-lru "$@" >/dev/null
    wait_for 10 redis-cli -h 127.0.0.1 -p "$port" ping || {
        echo "redis-server did not start on port $port:" >&2
        tail -20 "$dir/redis.log" >&2
        return 1
    }
}

# redis_stop DIR
redis_stop() {
    local dir=$1 pid
    pid_alive "$dir/redis.pid" || return 0
    pid=$(head -n1 "$dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    wait_for 10 eval "! kill -0 $pid" || kill -9 "$pid" 2>/dev/null || true
}
