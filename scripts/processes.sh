# Sourced by the benchmark scripts: a scratch folder, the processes they start, and cleanup.
#   WORK       a fresh temporary folder, removed on exit
#   PIDS       add every process started in the background; each is killed on exit
#   free_port  prints a loopback port that was free a moment ago
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
