#!/bin/sh
# Makes the secret files deploy/compose mounts, in secrets/ beside this
# script, each readable only by the user of the container that reads it.
# Run it once, as root (for chown); an existing file is kept.
set -eu
dir="$(cd "$(dirname "$0")" && pwd)/secrets"
mkdir -p "$dir"
chmod 0755 "$dir"
rand() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# put NAME UID CONTENT
put() {
  if [ ! -e "$dir/$1" ]; then
    umask 077
    printf '%s\n' "$3" > "$dir/$1"
  fi
  chown "$2:$2" "$dir/$1"
  chmod 0400 "$dir/$1"
}
hongbao=65532  # the image's user
put admin_key "$hongbao" "$(rand)"
put payment_key "$hongbao" "$(rand)"
put token_secret "$hongbao" "$(rand)"
# The Ed25519 seed (64 hex digits) every API process signs grant receipts
# with: one key for the deployment, so any process's receipt verifies
# against the keys any process publishes.
put receipt_key "$hongbao" "$(rand)"
# Read by hongbao, and by the Redis containers' start as root.
put redis_password "$hongbao" "$(rand)"
pg="$(rand)"
[ -e "$dir/postgres_password" ] && pg="$(cat "$dir/postgres_password")"
put postgres_password 999 "$pg"           # the postgres image's user
put pgpass "$hongbao" "*:*:hongbao:hongbao:$pg"
put grafana_admin_password 472 "$(rand)" # the grafana image's user
echo "secrets in $dir"
