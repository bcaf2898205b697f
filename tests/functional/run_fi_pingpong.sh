#!/bin/sh
# libfabric's own test program fi_pingpong (Debian package libfabric-bin) between two processes
# over ofi_layer on 127.0.0.1: reliable-datagram endpoints, FI_MSG and FI_TAGGED, every size it
# knows (1 B to 8 MiB) with its data integrity check, over tcp;ofi_layer, net;ofi_layer and
# shm;ofi_layer.
# Skipped (77) when fi_pingpong is not installed; a core that is not offered is left out.
# LAYER_PINGPONG_ITERS sets the round trips per size (default 20).
set -u
command -v fi_pingpong >/dev/null 2>&1 || {
	echo "SKIP: fi_pingpong (libfabric-bin) not installed"; exit 77; }
iters=${LAYER_PINGPONG_ITERS:-20}
# net picks its interfaces itself: keep it on loopback.
FI_NET_IFACE=${FI_NET_IFACE:-lo}
export FI_NET_IFACE
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

# True once something listens on TCP port $1 of 127.0.0.1 or of every IPv4 address (from
# /proc/net/tcp, state 0A).
listening() {
	awk -v port="$(printf '%04X' "$1")" \
		'($2 == "0100007F:" port || $2 == "00000000:" port) && $4 == "0A" { found = 1 }
		END { exit !found }' /proc/net/tcp
}

# One server/client pair; 0 when both exit 0, 2 when the server could not take the port.
pingpong() {
	prov=$1 mode=$2 port=$3
	set -- -p "$prov" -e rdm -m "$mode" -S all -c -I "$iters"
	timeout 300 fi_pingpong "$@" -B "$port" >"$tmp/server" 2>&1 &
	server=$!
	# The client does not retry its control connection: wait until the server listens
	# (bounded), or until it has exited (port taken).
	tries=0
	until listening "$port"; do
		if ! kill -0 "$server" 2>/dev/null; then
			wait "$server"
			return 2
		fi
		if [ $tries -ge 600 ]; then
			echo "  the server did not listen on port $port within a minute"
			kill "$server"
			wait "$server"
			return 1
		fi
		tries=$((tries + 1))
		sleep 0.1
	done
	timeout 300 fi_pingpong "$@" -P "$port" 127.0.0.1 >"$tmp/client" 2>&1
	client_rc=$?
	wait "$server"
	server_rc=$?
	[ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] && return 0
	echo "  client exit $client_rc, server exit $server_rc"
	tail -n 5 "$tmp/client" "$tmp/server"
	return 1
}

pass=0 fail=0 skip=0
for prov in "tcp;ofi_layer" "net;ofi_layer" "shm;ofi_layer"; do
	if ! fi_info -p "$prov" -t FI_EP_RDM >/dev/null 2>&1; then
		echo "SKIP: $prov not offered"
		skip=$((skip + 1))
		continue
	fi
	for mode in msg tagged; do
		for attempt in 1 2 3 4 5; do
			port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
			pingpong "$prov" "$mode" "$port"
			rc=$?
			[ $rc -ne 2 ] && break
		done
		if [ $rc -eq 0 ]; then
			echo "PASS: fi_pingpong -p '$prov' -e rdm -m $mode -S all -c -I $iters" \
				"($(tail -n 1 "$tmp/client" | awk '{ print $1 ": " $7 " us/xfer" }'))"
			pass=$((pass + 1))
		else
			echo "FAIL: fi_pingpong -p '$prov' -e rdm -m $mode -S all -c -I $iters"
			fail=$((fail + 1))
		fi
	done
done
echo "fi_pingpong: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
