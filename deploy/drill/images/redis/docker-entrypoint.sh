#!/bin/sh
# As the official image's: `redis-server ARGS` (or bare flags, or a .conf
# file) runs as the redis user, /data owned by it; anything else runs as is.
set -e
case "$1" in
  -*|*.conf) set -- redis-server "$@" ;;
esac
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user redis -exec chown redis '{}' +
  exec gosu redis "$0" "$@"
fi
exec "$@"
