#!/usr/bin/env bash
# Make sure a Postgres server answers and the tern database exists.
#
# - DATABASE_URL set: only check that it answers; exit non-zero if not.
# - Otherwise: local server on 127.0.0.1:5432. Start it if installed but
#   stopped, install it (apt) if missing, then create the database
#   ${TERN_DB_NAME:-tern} (connecting as user postgres, trust auth).
#
# Idempotent; prints nothing (to stderr, prefixed [tern]) unless it does work.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
INSTALL_HINT="set DATABASE_URL"

# ---------------------------------------------------------------- remote ----
if [ -n "${DATABASE_URL:-}" ]; then
  if ! have pg_isready; then
    have psql || apt_install postgresql-client
  fi
  if have pg_isready; then
    pg_isready -q -t 5 -d "$DATABASE_URL" && exit 0
  else
    psql -w -q -tA -d "$DATABASE_URL" -c 'select 1' >/dev/null 2>&1 && exit 0
  fi
  die "Postgres at DATABASE_URL=$(redact "$DATABASE_URL") does not answer"
fi

# ----------------------------------------------------------------- local ----
PGH=127.0.0.1
PGP=5432
DB_NAME="${TERN_DB_NAME:-tern}"

is_up() { have pg_isready && pg_isready -q -t 2 -h "$PGH" -p "$PGP"; }
psql_pg() { psql -X -w -q -v ON_ERROR_STOP=1 -h "$PGH" -p "$PGP" -U postgres "$@"; }

# The installed cluster that listens on 5432 ("VERSION NAME"), else the first one.
find_cluster() {
  have pg_lsclusters || return 1
  local c
  c="$(pg_lsclusters -h 2>/dev/null | awk -v p="$PGP" '$3 == p { print $1, $2; exit }')"
  [ -n "$c" ] || c="$(pg_lsclusters -h 2>/dev/null | awk 'NR == 1 { print $1, $2 }')"
  [ -n "$c" ] || return 1
  printf '%s\n' "$c"
}

# trust for local socket connections and 127.0.0.1/::1 TCP connections.
set_trust_auth() {
  local ver=$1 name=$2 hba
  hba="/etc/postgresql/$ver/$name/pg_hba.conf"
  [ -w "$hba" ] || die "cannot edit $hba to allow trust auth for user postgres (need root)"
  log "setting trust auth for local and 127.0.0.1/::1 connections in $hba"
  [ -e "$hba.tern-orig" ] || cp -p "$hba" "$hba.tern-orig"
  awk 'BEGIN { OFS = "\t" }
       /^[[:space:]]*#/ || NF == 0 { print; next }
       $1 == "local" { $NF = "trust"; print; next }
       $1 == "host" && ($4 == "127.0.0.1/32" || $4 == "::1/128") { $NF = "trust"; print; next }
       { print }' "$hba" >"$hba.tern-new"
  cat "$hba.tern-new" >"$hba" # keep owner and mode
  rm -f "$hba.tern-new"
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" reload >/dev/null
}

start_cluster() {
  local ver=$1 name=$2
  local me
  me="$(id -un)"
  [ "$me" = root ] || [ "$me" = postgres ] ||
    die "Postgres $ver/$name is stopped and starting it needs root or the postgres user (or set DATABASE_URL)"
  log "starting Postgres cluster $ver/$name"
  pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start >&2 ||
    pg_isready -q -t 2 -h "$PGH" -p "$PGP" ||
    die "could not start Postgres $ver/$name (see /var/log/postgresql/postgresql-$ver-$name.log)"
}

fresh=0
cluster=""
if ! is_up; then
  if ! cluster="$(find_cluster)"; then
    apt_install postgresql
    fresh=1
    cluster="$(find_cluster)" ||
      die "postgresql is installed but has no cluster; create one: pg_createcluster --start 15 main"
  fi
  # shellcheck disable=SC2086
  is_up || start_cluster $cluster
  waited=0
  until is_up; do
    if [ "$waited" -ge 30 ]; then
      die "Postgres on $PGH:$PGP did not answer within 30s"
    fi
    sleep 1
    waited=$((waited + 1))
  done
  [ "$waited" -eq 0 ] || log "Postgres answers on $PGH:$PGP"
fi

# Connecting as postgres must work without a password (trust auth).
if ! err="$(psql_pg -d postgres -tA -c 'select 1' 2>&1 >/dev/null)"; then
  if [ -z "$cluster" ]; then cluster="$(find_cluster)" || cluster=""; fi
  if [ -n "$cluster" ] && [ "$(id -u)" -eq 0 ] &&
    { [ "$fresh" -eq 1 ] || grep -qiE 'authentication|password|no pg_hba' <<<"$err"; }; then
    # shellcheck disable=SC2086
    set_trust_auth $cluster
    sleep 1
    err="$(psql_pg -d postgres -tA -c 'select 1' 2>&1 >/dev/null)" ||
      die "cannot connect to Postgres as postgres on $PGH:$PGP: $err"
  else
    die "cannot connect to Postgres as postgres on $PGH:$PGP without a password: $err (set DATABASE_URL or allow trust auth)"
  fi
fi

exists="$(psql_pg -d postgres -tA -v db="$DB_NAME" <<<"select 1 from pg_database where datname = :'db';")"
if [ "$exists" != 1 ]; then
  log "creating database $DB_NAME"
  createdb -w -h "$PGH" -p "$PGP" -U postgres "$DB_NAME"
fi
