#!/bin/sh
# Real packet loss and partitions: test_loss between two processes on the loopback of a private
# network namespace, where nftables drops packets on input (data and acknowledgements alike).
# For each provider of LOSS_PROVS (default "udp;ofi_layer tcp;ofi_layer net;ofi_layer"):
#   - data mode at each loss percentage of LOSS_PCTS (default "0 1 10");
#   - over udp, data mode at 1% loss with reordering and duplication as well
#     (FI_OFI_LAYER_DGRAM_FAULT, the core's test-only fault switch: nftables cannot do those);
#   - silent mode: the program partitions the two processes itself and checks that the sends
#     into the partition fail within the peer timeout and that the peer is talked to again.
# A provider that is not offered makes its runs SKIP. One line per run, then a summary; exit
# 1 if a run failed, 77 if none ran (or not root, or ip/nft missing: Debian packages iproute2,
# nftables), else 0. LOSS_MODES picks the kinds of runs (default "data fault silent"),
# LOSS_SEED fixes the fault seed (default: this shell's pid), LOSS_VERBOSE=1 prints every
# run's whole output; LT_LOSS_COUNT, LT_LOSS_DEADLINE and the
# FI_OFI_LAYER_* parameters are passed to the program.
set -u
bin=${LAYER_TEST_BUILDDIR:-.}/tests/functional
provs=${LOSS_PROVS:-"udp;ofi_layer tcp;ofi_layer net;ofi_layer"}
# net picks its interfaces itself: the namespace's loopback is where the test's addresses are.
FI_NET_IFACE=${FI_NET_IFACE:-lo}
export FI_NET_IFACE
# Sanitizer builds: the leaks of net itself are not ours (see the file); net's runs only.
net_lsan="suppressions=$(cd "$(dirname "$0")" && pwd)/lsan_net.supp:print_suppressions=0"
pcts=${LOSS_PCTS:-"0 1 10"}
modes=${LOSS_MODES:-"data fault silent"}
seed=${LOSS_SEED:-$$}
deadline=${LT_LOSS_DEADLINE:-100}
peer_timeout=${FI_OFI_LAYER_PEER_TIMEOUT:-2000}
# "lt" is a keyword of nft: the table needs another name.
table="inet ltloss"
chain=i
ns=ofilayer_loss_$$

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: run_loss.sh needs root (a network namespace and nftables rules)"
	exit 77
fi
for tool in ip nft timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool not found (Debian packages iproute2, nftables)"
		exit 77
	fi
done
[ -x "$bin/test_loss" ] || { echo "FAIL: $bin/test_loss not built"; exit 1; }

log=$(mktemp) || exit 99
run_pid=
has_ns=0
cleaned=0
# Leaves nothing behind: the run in flight, anything else in the namespace, the namespace.
# shellcheck disable=SC2317 # called from the traps
cleanup() {
	[ "$cleaned" -eq 1 ] && return
	cleaned=1
	[ -n "$run_pid" ] && kill "$run_pid" 2>/dev/null
	if [ "$has_ns" -eq 1 ]; then
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns"
	fi
	rm -f "$log"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

if ! ip netns add "$ns" 2>"$log"; then
	echo "SKIP: cannot create a network namespace ($(cat "$log"))"
	exit 77
fi
has_ns=1
nsx() {
	ip netns exec "$ns" "$@"
}
# shellcheck disable=SC2086 # $table is two words on purpose
if ! nsx ip link set lo up || ! nsx nft add table $table 2>"$log" ||
	! nsx nft add chain $table $chain '{ type filter hook input priority 0; }' 2>>"$log"; then
	echo "SKIP: nftables not usable in a network namespace ($(cat "$log"))"
	exit 77
fi

pass=0 fail=0 skip=0

# run LABEL PCT VAR=VALUE...: one run of test_loss in the namespace, PCT percent of the UDP and
# TCP packets dropped on input, with the environment given.
run() {
	label=$1 pct=$2
	shift 2
	# shellcheck disable=SC2086
	if ! nsx nft flush chain $table $chain ||
		{ [ "$pct" -gt 0 ] && ! nsx nft add rule $table $chain \
			"meta l4proto { udp, tcp } numgen random mod 100 < $pct counter drop"; }; then
		echo "FAIL: $label (cannot set the nftables rule)"
		fail=$((fail + 1))
		return
	fi
	start=$(date +%s)
	lsan=${LSAN_OPTIONS:-}
	case $prov in net*) lsan=${LSAN_OPTIONS:-$net_lsan} ;; esac
	# Not through nsx: $! must be the run itself (ip execs env, env execs timeout).
	ip netns exec "$ns" env LT_NETNS="$ns" LT_LOSS_PCT="$pct" LT_NFT_TABLE="$table" \
		LT_NFT_CHAIN="$chain" LT_LOSS_DEADLINE="$deadline" LSAN_OPTIONS="$lsan" "$@" \
		timeout $((deadline + 60)) "$bin/test_loss" >"$log" 2>&1 &
	run_pid=$!
	wait "$run_pid"
	rc=$?
	run_pid=
	secs=$(($(date +%s) - start))
	# shellcheck disable=SC2086
	dropped=$(nsx nft list chain $table $chain |
		sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
	dropped=${dropped:+"; $dropped packets dropped"}
	[ "${LOSS_VERBOSE:-0}" = 1 ] && sed 's/^/  | /' "$log"
	case $rc in
	0)
		echo "PASS: $label ($secs s; $(grep -E '^# (parent: .* each way|partition:)' \
			"$log" | sed 's/^# //' | tr '\n' ';' | sed 's/;$//; s/;/; /g')$dropped)"
		pass=$((pass + 1)) ;;
	77)
		echo "SKIP: $label ($(grep -m 1 '^# skip' "$log" | sed 's/^# skip: //'))"
		skip=$((skip + 1)) ;;
	*)
		echo "FAIL: $label (exit status $rc after $secs s$dropped)"
		grep -E '^(FAIL|# partition)' "$log" | head -n 20
		tail -n 2 "$log"
		fail=$((fail + 1)) ;;
	esac
}

# True if LOSS_MODES asks for runs of this kind.
wanted() {
	case " $modes " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

for prov in $provs; do
	if wanted data; then
		for pct in $pcts; do
			run "data $prov, $pct% loss" "$pct" LAYER_TEST_PROV="$prov" \
				LT_LOSS_MODE=data
		done
	fi
	case $prov in
	udp*)
		fault="reorder=10,dup=5,seed=$seed"
		wanted fault && run "data $prov, 1% loss, $fault" 1 LAYER_TEST_PROV="$prov" \
			LT_LOSS_MODE=data FI_OFI_LAYER_DGRAM_FAULT="$fault" ;;
	esac
	wanted silent && run "silent peer $prov, peer timeout $peer_timeout ms" 0 \
		LAYER_TEST_PROV="$prov" LT_LOSS_MODE=silent FI_OFI_LAYER_PEER_TIMEOUT="$peer_timeout"
done

echo "loss: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] || exit 1
[ $pass -gt 0 ] || exit 77
exit 0
