#!/usr/bin/env bash
# ctest softverbs.perftest.*: Debian's perftest program PROG (ib_write_bw, ib_read_bw, ...),
# unchanged, between a server and a client process on softverbs' soft_0, over RC with
# perftest's own TCP exchange of the QP numbers on port PORT (no rdma_cm). Both must print
# their result table. The environment (LD_LIBRARY_PATH, SOFTVERBS_CONFIG) comes from ctest.
#   perftest.sh PROG PORT [perftest options...]
set -u
prog="$1"
port="$2"
shift 2
if ! command -v "$prog" >/dev/null 2>&1; then
  echo "perftest: '$prog' is not installed; run scripts/install-deps.sh (Debian package perftest)"
  exit 1
fi
if ! command -v ss >/dev/null 2>&1; then
  echo "perftest: 'ss' (iproute2) is missing; run scripts/install-deps.sh"
  exit 1
fi
out=$(mktemp -d /tmp/softverbs-perftest.XXXXXX)
trap 'rm -rf "$out"' EXIT
args=(-d soft_0 -x 0 -p "$port" "$@")

timeout 60 "$prog" "${args[@]}" >"$out/server" 2>&1 &
server=$!
# The server accepts one TCP connection only: wait until it listens instead of probing it.
for _ in $(seq 1 200); do
  ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.05
done
timeout 60 "$prog" "${args[@]}" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
wait "$server"
server_rc=$?

echo "==== server: $prog ${args[*]} (exit $server_rc)"
cat "$out/server"
echo "==== client: $prog ${args[*]} 127.0.0.1 (exit $client_rc)"
cat "$out/client"
# The result table: "#bytes #iterations ..." and a row of numbers under it.
table='^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+'
if [ "$client_rc" -ne 0 ] || [ "$server_rc" -ne 0 ] || ! grep -Eq "$table" "$out/client" ||
   ! grep -Eq "$table" "$out/server"; then
  echo "perftest: $prog FAILED"
  exit 1
fi
echo "perftest: $prog OK"
