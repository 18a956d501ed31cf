#!/usr/bin/env bash
# A throwaway S3-compatible server for tests and local trials: Ceph's RADOS Gateway (radosgw, from
# Debian's packages, installed with apt when missing) on a one-monitor, one-OSD Ceph cluster that keeps
# its objects in memory (memstore). Everything lives in DIR; nothing outside it is touched.
#
#   scripts/s3-server.sh start DIR   starts it (about 15 s), creates a user and the bucket `runaii`, writes
#                                    DIR/env (the endpoint, bucket and credentials as shell assignments:
#                                    RUNAII_S3_ENDPOINT, RUNAII_S3_BUCKET, RUNAII_S3_ACCESS_KEY_ID,
#                                    RUNAII_S3_SECRET_ACCESS_KEY) and prints it
#   scripts/s3-server.sh serve DIR   as start, then stays until its standard input closes, and stops and
#                                    deletes DIR: a test's server ends with the test process, however it ends
#   scripts/s3-server.sh stop DIR    stops its processes (the objects go with them)
#   scripts/s3-server.sh stop-gateway DIR / start-gateway DIR
#                                    stops or starts radosgw alone (the cluster, and the objects, stay):
#                                    how a test makes the object store unreachable for a while
set -euo pipefail

usage() { echo "usage: $0 start|serve|stop|stop-gateway|start-gateway DIR" >&2; exit 2; }
[ "$#" -eq 2 ] || usage
command="$1"
dir="$(mkdir -p "$2" && cd "$2" && pwd)"
conf="$dir/ceph.conf"

# The processes of DIR's cluster, by the pid files its daemons write.
stop_daemon() {
  local pidfile="$dir/run/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  kill "$pid" 2>/dev/null || true
  # Gone, or a zombie nobody reaps (a daemon's parent is whatever adopted it).
  for _ in $(seq 1 50); do
    case "$(ps -o stat= -p "$pid" 2>/dev/null || true)" in "" | Z*) break ;; esac
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

start_gateway() {
  radosgw -c "$conf" -n client.rgw
  local port deadline=$((SECONDS + 60))
  port="$(cat "$dir/port")"
  # The gateway answers 200 to an anonymous GET / once it has made its pools.
  until [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$port/" || true)" = 200 ]; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "s3-server: radosgw did not answer within 60 s (logs in $dir/log)" >&2; exit 1; }
    sleep 0.3
  done
}

stop_all() {
  stop_daemon client.rgw
  stop_daemon osd.0
  stop_daemon mon.a
}

case "$command" in
  stop) stop_all; exit 0 ;;
  stop-gateway) stop_daemon client.rgw; exit 0 ;;
  start-gateway) start_gateway; exit 0 ;;
  start) ;;
  serve) trap 'stop_all; rm -rf "$dir"' EXIT ;;
  *) usage ;;
esac

if ! command -v radosgw >/dev/null || ! command -v ceph-osd >/dev/null || ! command -v ceph-mon >/dev/null; then
  echo "s3-server: installing radosgw, ceph-mon and ceph-osd (Debian's packages)" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends radosgw ceph-mon ceph-osd >/dev/null
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
mon_port="$(free_port)"
echo "$port" >"$dir/port"
mkdir -p "$dir"/{mon,osd,run,log,rgw}
fsid="$(cat /proc/sys/kernel/random/uuid)"
cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
keyring = $dir/keyring
run dir = $dir/run
log file = $dir/log/\$name.log
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
mon data = $dir/mon
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = 4294967296
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
CONF

# cephx: radosgw authenticates to the cluster even when the cluster asks for nothing.
keyring="$dir/keyring"
ceph-authtool --create-keyring "$keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' >/dev/null
ceph-authtool "$keyring" --gen-key -n client.rgw --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null

monmaptool --create --addv a "[v2:127.0.0.1:$mon_port]" --fsid "$fsid" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$keyring" 2>>"$dir/log/setup.log"
ceph-mon -c "$conf" -i a 2>>"$dir/log/setup.log"
ceph -c "$conf" osd create >/dev/null 2>>"$dir/log/setup.log"
ceph-osd -c "$conf" -i 0 --mkfs 2>>"$dir/log/setup.log"
ceph-osd -c "$conf" -i 0 2>>"$dir/log/setup.log"
start_gateway

access_key="runaii$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
secret_key="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
radosgw-admin -c "$conf" -n client.admin user create --uid=runaii --display-name=runaii \
  --access-key="$access_key" --secret-key="$secret_key" >/dev/null 2>>"$dir/log/setup.log"
# The bucket, created as S3 clients do: a signed PUT on its name (the hash is the empty body's, which
# radosgw wants named and curl does not send by itself).
curl -sf -X PUT -H "x-amz-content-sha256: $(printf '' | sha256sum | cut -d' ' -f1)" --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access_key:$secret_key" "http://127.0.0.1:$port/runaii" >/dev/null

cat >"$dir/env" <<ENV
RUNAII_S3_ENDPOINT=http://127.0.0.1:$port
RUNAII_S3_BUCKET=runaii
RUNAII_S3_ACCESS_KEY_ID=$access_key
RUNAII_S3_SECRET_ACCESS_KEY=$secret_key
ENV
cat "$dir/env"
if [ "$command" = serve ]; then
  # Until whoever started this closes its end (exits, or is killed).
  cat >/dev/null
fi
