#!/bin/bash
# As the official image's: on the first start (an empty PGDATA) initdb with
# POSTGRES_USER as the superuser and the password of POSTGRES_PASSWORD or
# POSTGRES_PASSWORD_FILE, create POSTGRES_DB, accept password logins from
# any address; then run postgres as the postgres user.
set -euo pipefail
if [ "${1:0:1}" = - ]; then set -- postgres "$@"; fi
if [ "$1" != postgres ]; then exec "$@"; fi
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  chown -R postgres:postgres "$PGDATA"
  exec gosu postgres "$0" "$@"
fi
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
password="${POSTGRES_PASSWORD:-}"
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  password="$(< "$POSTGRES_PASSWORD_FILE")"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "$password" ] && [ "${POSTGRES_HOST_AUTH_METHOD:-}" != trust ]; then
    echo "postgres: no POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE: refusing to start without a password" >&2
    exit 1
  fi
  pwfile="$(mktemp)"
  printf '%s\n' "$password" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all ${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}" >> "$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
  if [ "$db" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -h /var/run/postgresql -U "$user" -d postgres -q -c "CREATE DATABASE \"$db\""
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres: initialized $PGDATA (user $user, database $db)"
fi
exec postgres -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "${@:2}"
