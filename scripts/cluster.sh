#!/usr/bin/env bash
# A multi-host kvpool pool on one machine (root): every "server" is a network namespace, every
# rail a bridge, every (server, rail) a veth "NIC" with an address on that rail's subnet, capped
# with tc tbf. Inside the namespaces it starts one master per pool part and the storage
# services, and writes the pool file every client uses.
#
#   scripts/cluster.sh up        build the network, start masters and stores, wait until mounted
#   scripts/cluster.sh status    namespaces, links and rates, processes, `kvpool stat`
#   scripts/cluster.sh exec S CMD...   run CMD inside server S's namespace
#   scripts/cluster.sh link S R up|down   set server S's rail-R link (its switch port)
#   scripts/cluster.sh down      stop every process it started (by PID), remove every namespace
#
# Settings (environment; `up` records them, the other commands read them back):
#   SERVERS=2 RAILS=2 PARTS=$RAILS   servers, rails, pool parts (part p's master: server p mod
#                                    SERVERS, on rail p; a store on rail r joins part r mod PARTS)
#   POOLS=shared                     shared: one pool over every server (CLUSTER_DIR/pool.conf);
#                                    split: each server its own PARTS masters (on its rails p)
#                                    and stores (CLUSTER_DIR/pool-s<S>.conf), as the published
#                                    per-server pools
#   RAIL_GBPS=0                      cap per NIC and direction in Gbit/s (0: uncapped)
#   STORE_SERVERS="all"              servers that run stores, e.g. "1" or "0 2"
#   STORE_MEMORY=256MiB              segment of each store (one store per server and rail)
#   CLUSTER=kvp                      name prefix of namespaces (CLUSTER-s0, CLUSTER-fabric)
#   CLUSTER_DIR=/tmp/kvpool-cluster-$CLUSTER   logs, PIDs, pool file
#   SUBNET=10.77                     rail r is SUBNET.r.0/24; server s is host s+1 on it
#   STORE_FLAGS=""                   more flags for every store, e.g. "--transport ucx --ucx-tls tcp"
#   KVPOOL=build/src/cli/kvpool      the binary
# Every address is inside these namespaces: nothing leaves the machine.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-kvp}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/kvpool-cluster-$CLUSTER}
FABRIC="$CLUSTER-fabric"
MASTER_PORT=50051

die() { echo "cluster.sh: $*" >&2; exit 1; }
ns() { echo "$CLUSTER-s$1"; }
addr() { echo "$SUBNET.$2.$(($1 + 1))"; }  # addr SERVER RAIL
master_server() { echo $(($1 % SERVERS)); }  # master_server PART

load_settings() {
  [ -f "$CLUSTER_DIR/settings" ] || die "no cluster '$CLUSTER' is up (no $CLUSTER_DIR/settings)"
  # shellcheck disable=SC1091
  . "$CLUSTER_DIR/settings"
}

# The pool file a store on SERVER joins, and every pool file (POOLS=split: one per server).
pool_file() { if [ "${POOLS:-shared}" = split ]; then echo "$CLUSTER_DIR/pool-s$1.conf"; else echo "$CLUSTER_DIR/pool.conf"; fi; }
pool_files() {
  if [ "${POOLS:-shared}" = split ]; then seq 0 $((SERVERS - 1)) | while read -r s; do pool_file "$s"; done
  else pool_file 0; fi
}

record() { echo "$1 $2" >>"$CLUSTER_DIR/pids"; }  # record PID NAME

# start NAME SERVER CMD...: runs CMD in server's namespace, logs to CLUSTER_DIR/NAME.log.
start() {
  local name=$1 server=$2; shift 2
  ip netns exec "$(ns "$server")" "$@" >"$CLUSTER_DIR/$name.log" 2>&1 </dev/null &
  record $! "$name"
}

# start_master SERVER PART POOL_FILE NAME: PART's master on SERVER's rail PART, listed in POOL_FILE.
start_master() {
  echo "part$2 = $(addr "$1" "$2"):$MASTER_PORT" >>"$3"
  start "$4" "$1" "$KVPOOL" master --part "$2" --listen "$(addr "$1" "$2"):$MASTER_PORT" \
    --metrics-listen "$(addr "$1" "$2"):9464"
}

cap() {  # cap NETNS DEV: tbf at RAIL_GBPS on DEV's egress
  [ "$RAIL_GBPS" = "0" ] && return
  # A burst of at least 4 ms at the rate (and >= 256 KiB: veth sends 64 KiB GSO packets).
  local burst=$(awk -v g="$RAIL_GBPS" 'BEGIN { b = g * 1e9 / 8 * 0.004; if (b < 262144) b = 262144; printf "%d", b }')
  ip -n "$1" link set "$2" mtu 9000 2>/dev/null || true
  tc -n "$1" qdisc replace dev "$2" root tbf rate "${RAIL_GBPS}gbit" burst "$burst" latency 50ms
}

up() {
  SERVERS=${SERVERS:-2} RAILS=${RAILS:-2}
  PARTS=${PARTS:-$RAILS} RAIL_GBPS=${RAIL_GBPS:-0} POOLS=${POOLS:-shared}
  STORE_SERVERS=${STORE_SERVERS:-all} STORE_MEMORY=${STORE_MEMORY:-256MiB}
  SUBNET=${SUBNET:-10.77} KVPOOL=$(realpath "${KVPOOL:-build/src/cli/kvpool}")
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
  [ -x "$KVPOOL" ] || die "no kvpool binary at $KVPOOL (build first, or set KVPOOL)"
  [ "$PARTS" -ge 1 ] && [ "$PARTS" -le "$RAILS" ] || die "PARTS ($PARTS) must be 1..RAILS ($RAILS): part p's master sits on rail p"
  [ "$SERVERS" -ge 1 ] && [ "$SERVERS" -le 64 ] && [ "$RAILS" -ge 1 ] && [ "$RAILS" -le 16 ] || die "SERVERS 1..64, RAILS 1..16"
  [ "$POOLS" = shared ] || [ "$POOLS" = split ] || die "POOLS must be shared or split, not '$POOLS'"
  [ -e "$CLUSTER_DIR/settings" ] && die "cluster '$CLUSTER' is already up ($CLUSTER_DIR); run down first"
  [ "$STORE_SERVERS" = "all" ] && STORE_SERVERS=$(seq -s' ' 0 $((SERVERS - 1)))
  # Exit 77 ("cannot here", for tests to skip) when namespaces, veths or bridges are refused.
  ip netns add "$FABRIC" 2>/dev/null || { echo "cluster.sh: cannot create network namespaces here" >&2; exit 77; }
  if ! { ip -n "$FABRIC" link add probe0 type veth peer probe1 && ip -n "$FABRIC" link add probebr type bridge; } 2>/dev/null; then
    ip netns delete "$FABRIC"
    echo "cluster.sh: cannot create veth pairs or bridges here" >&2
    exit 77
  fi
  ip -n "$FABRIC" link delete probe0
  ip -n "$FABRIC" link delete probebr
  mkdir -p "$CLUSTER_DIR"
  : >"$CLUSTER_DIR/pids"
  declare -p SERVERS RAILS PARTS POOLS RAIL_GBPS STORE_SERVERS STORE_MEMORY SUBNET KVPOOL | sed 's/^declare -- //' \
    >"$CLUSTER_DIR/settings"
  trap 'echo "cluster.sh: up failed; tearing down (logs kept in $CLUSTER_DIR)" >&2; down; exit 1' ERR

  ip -n "$FABRIC" link set lo up
  for r in $(seq 0 $((RAILS - 1))); do
    ip -n "$FABRIC" link add "r$r" type bridge
    ip -n "$FABRIC" link set "r$r" up
  done
  for s in $(seq 0 $((SERVERS - 1))); do
    ip netns add "$(ns "$s")"
    ip -n "$(ns "$s")" link set lo up
    for r in $(seq 0 $((RAILS - 1))); do
      # NIC "rail$r" in the server; its switch port "s${s}r$r" on bridge r$r.
      ip link add "rail$r" netns "$(ns "$s")" type veth peer "s${s}r$r" netns "$FABRIC"
      ip -n "$FABRIC" link set "s${s}r$r" master "r$r" up
      ip -n "$(ns "$s")" addr add "$(addr "$s" "$r")/24" dev "rail$r"
      ip -n "$(ns "$s")" link set "rail$r" up
      cap "$(ns "$s")" "rail$r"
      cap "$FABRIC" "s${s}r$r"
    done
  done

  # Masters: one per part, of the shared pool or of every server's own.
  local s p
  if [ "$POOLS" = shared ]; then
    : >"$CLUSTER_DIR/pool.conf"
    for p in $(seq 0 $((PARTS - 1))); do start_master "$(master_server "$p")" "$p" "$CLUSTER_DIR/pool.conf" "master-p$p"; done
  else
    for s in $(seq 0 $((SERVERS - 1))); do
      : >"$CLUSTER_DIR/pool-s$s.conf"
      for p in $(seq 0 $((PARTS - 1))); do start_master "$s" "$p" "$CLUSTER_DIR/pool-s$s.conf" "master-s${s}p$p"; done
    done
  fi
  local stores=0
  for s in $STORE_SERVERS; do
    mkdir -p "$CLUSTER_DIR/s$s"
    for r in $(seq 0 $((RAILS - 1))); do
      start "store-s${s}r$r" "$s" "$KVPOOL" store --pool-file "$(pool_file "$s")" --part $((r % PARTS)) \
        --memory "$STORE_MEMORY" --listen "$(addr "$s" "$r"):0" --advertise-host "$(addr "$s" "$r")" \
        --shm-dir "$CLUSTER_DIR/s$s" --no-huge-pages ${STORE_FLAGS:-}
      stores=$((stores + 1))
    done
  done
  # Ready when every store's segment is mounted (asked from server 0, as a client would).
  local segments=0 file
  for _ in $(seq 1 600); do
    segments=0
    for file in $(pool_files); do
      segments=$((segments + $(ip netns exec "$(ns 0)" "$KVPOOL" stat --pool-file "$file" --timeout-ms 1000 \
        2>/dev/null | grep -c '^  segment ' || true)))
    done
    [ "$segments" -eq "$stores" ] && break
    sleep 0.1
  done
  [ "$segments" -eq "$stores" ] || { echo "cluster.sh: only $segments of $stores stores mounted; logs in $CLUSTER_DIR" >&2; false; }
  trap - ERR
  echo "cluster '$CLUSTER' up: $SERVERS servers x $RAILS rails ($([ "$RAIL_GBPS" = 0 ] && echo uncapped || echo "$RAIL_GBPS Gbit/s per NIC")), $POOLS pool$([ "$POOLS" = split ] && echo s) of $PARTS parts, $stores stores"
  for file in $(pool_files); do
    echo "pool file: $file"
    sed 's/^/  /' "$file"
  done
  echo "run a client: scripts/cluster.sh exec 0 $KVPOOL stat --pool-file $(pool_files | head -1)"
}

status() {
  load_settings
  echo "cluster '$CLUSTER': $SERVERS servers x $RAILS rails, $POOLS pools of $PARTS parts, RAIL_GBPS=$RAIL_GBPS ($CLUSTER_DIR)"
  for s in $(seq 0 $((SERVERS - 1))); do
    for r in $(seq 0 $((RAILS - 1))); do
      local state rate
      state=$(ip -n "$FABRIC" -br link show "s${s}r$r" 2>/dev/null | awk '{ print $2 }')
      rate=$(tc -n "$(ns "$s")" qdisc show dev "rail$r" 2>/dev/null | grep -o 'rate [^ ]*' || echo "uncapped")
      echo "  server $s rail $r  $(addr "$s" "$r")  link ${state:-missing}  $rate"
    done
  done
  while read -r pid name; do
    if kill -0 "$pid" 2>/dev/null; then echo "  $name  pid $pid  running"; else echo "  $name  pid $pid  GONE"; fi
  done <"$CLUSTER_DIR/pids"
  local file
  for file in $(pool_files); do
    ip netns exec "$(ns 0)" "$KVPOOL" stat --pool-file "$file" --timeout-ms 2000 || true
  done
}

down() {
  if [ -f "$CLUSTER_DIR/pids" ]; then
    local pids; pids=$(awk '{ print $1 }' "$CLUSTER_DIR/pids")
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
    for pid in $pids; do
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  # Deleting a namespace deletes the veths and bridges in it.
  for n in $(ip netns list | awk '{ print $1 }' | grep -E "^$CLUSTER-(s[0-9]+|fabric)$" || true); do
    ip netns delete "$n"
  done
  rm -f "$CLUSTER_DIR/settings" "$CLUSTER_DIR/pids"
  echo "cluster '$CLUSTER' down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  exec)
    [ $# -ge 3 ] || die "usage: cluster.sh exec SERVER CMD..."
    load_settings
    server=$2; shift 2
    exec ip netns exec "$(ns "$server")" "$@" ;;
  link)
    [ $# -eq 4 ] && { [ "$4" = up ] || [ "$4" = down ]; } || die "usage: cluster.sh link SERVER RAIL up|down"
    load_settings
    ip -n "$FABRIC" link set "s$2r$3" "$4" ;;
  *) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
