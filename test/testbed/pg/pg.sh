#!/usr/bin/env bash
# Strata's PostgreSQL test bed: a PostgreSQL cluster from Debian's packages
# (postgresql), started with initdb and pg_ctl as the postgres user on
# loopback, on a port of its own: not the distribution's cluster (which is
# left as it is, started or not). Tests of the daemons' PostgreSQL stores
# find it through STRATA_PG_ENV (internal/pgtest). See README.md beside this file.
set -euo pipefail

usage() {
  cat <<'USAGE'
Usage: pg.sh <command> [options]

Commands:
  up        start the cluster (initdb the first time); already running: nothing
  down      stop it (pg_ctl stop -m fast)
  status    say whether it answers, and where
  env       print its environment file
  logs      print the tail of its log

Options (or the variables in brackets):
  --name N        instance name; two instances with different names and
                  ports can run side by side                     [PG_NAME, default pg]
  --port P        the port on 127.0.0.1                           [PG_PORT, default 25432]
  --fresh         (up) delete the data first                      [PG_FRESH=1]
  --purge         (down) also delete the instance folder

Paths: the instance lives in TB_STATE/<name> (/var/lib/strata/testbed/pg): data/
(owned by postgres), the strata role's password (password, mode 0600), the log
and the environment file env:
  STRATA_PG_URL            postgres://strata@127.0.0.1:<port>/postgres?sslmode=disable
  STRATA_PG_PASSWORD_FILE  the password file
The strata role may create databases; internal/pgtest makes one per test.
USAGE
}

CMD=${1:-}; [ $# -gt 0 ] && shift
PG_NAME=${PG_NAME:-pg}
PG_PORT=${PG_PORT:-25432}
PG_FRESH=${PG_FRESH:-0}
PURGE=0
TB_STATE=${TB_STATE:-/var/lib/strata/testbed}
while [ $# -gt 0 ]; do
  case $1 in
    --name) PG_NAME=$2; shift 2 ;;
    --port) PG_PORT=$2; shift 2 ;;
    --fresh) PG_FRESH=1; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pg.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
case $PG_NAME in *[!a-z0-9_-]*|'') echo "pg.sh: --name $PG_NAME: use lowercase letters, digits, - and _" >&2; exit 2 ;; esac
case $PG_PORT in *[!0-9]*|'') echo "pg.sh: --port $PG_PORT: not a port number" >&2; exit 2 ;; esac

INST=$TB_STATE/$PG_NAME
DATA=$INST/data
LOG=$INST/postgresql.log
ENVF=$INST/env
PWF=$INST/password

log() { echo "pg[$PG_NAME]: $*" >&2; }
die() { log "$*"; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "run as root (it starts PostgreSQL as the postgres user)"; }

# The newest PostgreSQL Debian installed: /usr/lib/postgresql/<major>/bin.
bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$d" ] && [ -x "$d/initdb" ] || die "no PostgreSQL server in /usr/lib/postgresql/*/bin: apt-get install postgresql (make deps)"
  echo "$d"
}

as_pg() { runuser -u postgres -- "$@"; }

answers() { [ -d "$DATA" ] && as_pg "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -t 2; }

cmd_up() {
  need_root
  BIN=$(bindir)
  id postgres >/dev/null 2>&1 || die "no postgres user: apt-get install postgresql"
  if [ "$PG_FRESH" = 1 ] && [ -d "$INST" ]; then
    [ -s "$DATA/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$DATA" "$ENVF" "$PWF"
  fi
  mkdir -p "$INST"; chmod 0755 "$INST"
  if [ -s "$DATA/postmaster.pid" ] && answers && [ -s "$ENVF" ]; then
    log "already running on 127.0.0.1:$PG_PORT; environment file: $ENVF"; return 0
  fi
  if [ ! -s "$DATA/PG_VERSION" ]; then
    rm -rf "$DATA"; mkdir -p "$DATA"; chown postgres:postgres "$DATA"; chmod 0700 "$DATA"
    # The password of the strata role: made once, kept with the data.
    (umask 077; head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$PWF")
    chmod 0600 "$PWF"
    local su; su=$(mktemp); chown postgres "$su"; chmod 0600 "$su"; head -c 24 /dev/urandom | base64 >"$su"
    as_pg "$BIN/initdb" -D "$DATA" -U postgres --pwfile="$su" -A scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$INST/initdb.log" 2>&1 ||
      { rm -f "$su"; cat "$INST/initdb.log" >&2; die "initdb failed"; }
    rm -f "$su"
    # The superuser signs in over the socket only (peer), everyone else with a password.
    cat >"$DATA/pg_hba.conf" <<'HBA'
# pg.sh: the postgres superuser over the bed's socket, everyone else with a password over loopback.
local   all   postgres                 peer
host    all   all       127.0.0.1/32   scram-sha-256
host    all   all       ::1/128        scram-sha-256
HBA
    chown postgres:postgres "$DATA/pg_hba.conf"
  fi
  [ -s "$PWF" ] || die "$PWF is missing: start with --fresh"
  : >>"$LOG"; chown postgres "$LOG"
  # Its own port and socket folder: the distribution's cluster (5432,
  # /var/run/postgresql) is not touched.
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$DATA -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null || { tail -n 30 "$LOG" >&2; die "PostgreSQL did not start"; }
  local pw; pw=$(cat "$PWF")
  as_pg "$BIN/psql" -h "$DATA" -p "$PG_PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -q -v pw="$pw" >/dev/null <<'SQL'
SELECT format('CREATE ROLE strata LOGIN CREATEDB PASSWORD %L', :'pw') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'strata') \gexec
SELECT format('ALTER ROLE strata LOGIN CREATEDB PASSWORD %L', :'pw') \gexec
SQL
  cat >"$ENVF" <<ENV
# PostgreSQL test bed $PG_NAME, written by test/testbed/pg/pg.sh at $(date -u +%FT%TZ)
STRATA_PG_NAME=$PG_NAME
STRATA_PG_VERSION=$(as_pg "$BIN/postgres" -V | awk '{print $3}')
STRATA_PG_URL=postgres://strata@127.0.0.1:$PG_PORT/postgres?sslmode=disable
STRATA_PG_PASSWORD_FILE=$PWF
STRATA_PG_LOG=$LOG
ENV
  log "up on 127.0.0.1:$PG_PORT; environment file: $ENVF"
}

cmd_down() {
  need_root
  if [ -s "$DATA/postmaster.pid" ]; then
    BIN=$(bindir)
    as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null || die "pg_ctl stop failed; see $LOG"
  fi
  rm -f "$ENVF"
  if [ "$PURGE" = 1 ]; then rm -rf "$INST"; log "purged $INST"; fi
  log "down"
}

cmd_status() {
  BIN=$(bindir)
  if answers; then
    echo "pg[$PG_NAME] answers on 127.0.0.1:$PG_PORT (PID $(head -n 1 "$DATA/postmaster.pid")); env file $ENVF"
  else
    echo "pg[$PG_NAME] is not running"; return 1
  fi
}

case $CMD in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) [ -s "$ENVF" ] || die "not running (no $ENVF)"; cat "$ENVF" ;;
  logs) tail -n 100 "$LOG" ;;
  -h|--help|help|'') usage ;;
  *) echo "pg.sh: unknown command $CMD" >&2; usage >&2; exit 2 ;;
esac
