/*
 * Provider entry point: the fi_provider object and its parameters.
 */
#include "config.h"

#include <strings.h>

#include "layer/layer.h"
#include "layer/dgram/dgram.h"
#include "layer/fabric.h"

struct fi_provider *util_prov;

struct layer_settings layer_settings = {
	.core_choice = LAYER_CORE_AUTO,
	.eager_size = 16384,
	.rx_buf_cnt = 64,
	.tx_size = 1024,
	.rx_size = 1024,
	.cq_batch = 32,
	.unexp_max = 16 << 20,
	.direct_recv = 1,
	.direct_eager_size = 256 << 10,
	.rma_eager_size = 4 << 20,
	.mr_cache_size = 1024,
	.coll_large_size = 64 << 10,
	.coll_ring_allgather_size = 1 << 20,
	.coll_paired = 2,
	.coll_segment_size = 256 << 10,
	.ring_slots = 64,
	.ring_active = SIZE_MAX,
	.ring_earn = 16,
	.ring_idle_ms = 1000,
	.cq_group = SIZE_MAX,
	.direct_rma = 1,
	.peer_timeout_ms = 30000,
	.keepalive_ms = 1000,
	.cma_size = 16384,
	.cma_msg_size = 65536,
	.progress_idle_ms = 1,
};

struct fi_provider layer_prov = {
	.name = LAYER_PROV_NAME,
	.version = LAYER_PROV_VERSION,
	.fi_version = LAYER_FI_VERSION,
	.getinfo = layer_getinfo,
	.fabric = layer_fabric_open,
};

/* One table for every FI_OFI_LAYER_* parameter: defined, read and documented together. */
static const struct layer_param {
	const char *name;
	size_t *value;
	size_t min;
	size_t max;
	const char *help;
} layer_params[] = {
	{ "eager_size", &layer_settings.eager_size, 0, 1 << 20,
	  "With bounce buffers (no direct receive), the payload bytes each receive buffer "
	  "takes after the header: the largest message payload peers send inline with its "
	  "header; larger messages use rendezvous, the receiver pulling the data with the "
	  "core's RMA read (default: 16384)" },
	{ "rx_buf_cnt", &layer_settings.rx_buf_cnt, 4, 65536,
	  "A quarter of the receive buffers an endpoint keeps posted at most for all its "
	  "peers (over a MSG core a quarter of this many at first, doubled each time they run "
	  "out), each eager_size plus the header (with direct receive, 256 bytes plus the "
	  "header) (default: 64)" },
	{ "tx_size", &layer_settings.tx_size, 16, 1 << 20,
	  "Default transmit queue depth reported in tx_attr->size (default: 1024)" },
	{ "rx_size", &layer_settings.rx_size, 16, 1 << 20,
	  "Default receive queue depth reported in rx_attr->size (default: 1024)" },
	{ "cq_batch", &layer_settings.cq_batch, 1, 64,
	  "Core completions read per progress call (default: 32)" },
	{ "unexp_max", &layer_settings.unexp_max, 0, (size_t) 1 << 40,
	  "Bytes the unexpected messages of an endpoint may hold, each receive buffer or "
	  "header record they keep counted in full; past it the endpoint pushes back on its "
	  "senders, see fi_layer(7) (default: 16777216)" },
	{ "direct_recv", &layer_settings.direct_recv, 0, 1,
	  "Over libfabric 1.17's tcp, have the core read each message's payload straight "
	  "into the matching receive's buffer, the only copy on the receive side; 0 keeps "
	  "bounce buffers (default: 1)" },
	{ "direct_eager_size", &layer_settings.direct_eager_size, 1024, LAYER_EAGER_MAX,
	  "With direct receive, the largest message payload (bytes, rounded down to KiB) "
	  "this endpoint's peers send inline with its header; larger ones use rendezvous "
	  "(default: 262144)" },
	{ "rma_eager_size", &layer_settings.rma_eager_size, 1024, LAYER_EAGER_MAX,
	  "With direct receive, the largest RMA write, or read answer, whose data travels with "
	  "its header (bytes, rounded down to KiB), placed by the core straight into the target "
	  "region or the read's buffers; larger ones are read with the core's RMA read "
	  "(default: 4194304)" },
	{ "mr_cache_size", &layer_settings.mr_cache_size, 0, 1 << 20,
	  "Registrations of rendezvous send buffers kept for reuse once their sends are done, "
	  "over cores whose registrations do not pin memory (tcp, net, sockets, shm, udp); a "
	  "buffer sent again is not registered again. 0 registers each send (default: 1024)" },
	{ "coll_large_size", &layer_settings.coll_large_size, 0, (size_t) 1 << 40,
	  "Collectives: from this many bytes of data, allreduce runs as a ring (reduce-scatter "
	  "then allgather) instead of recursive doubling, and broadcast pipelines its data down "
	  "the tree in segments (default: 65536)" },
	{ "coll_segment_size", &layer_settings.coll_segment_size, 1, (size_t) 1 << 30,
	  "Collectives: the bytes of each segment a large broadcast pipelines down its tree "
	  "(default: 262144)" },
	{ "coll_ring_allgather_size", &layer_settings.coll_ring_allgather_size, 0,
	  (size_t) 1 << 40,
	  "Collectives: from this many bytes of result, allgather runs as a ring (n - 1 "
	  "messages per member, neighbours only) instead of by Bruck's algorithm (ceil(log2 n) "
	  "messages, the same bytes, a final copy) (default: 1048576)" },
	{ "coll_paired", &layer_settings.coll_paired, 0, 2,
	  "Collectives: 1 runs barriers and small allreduces of 4, 8, 16... members as recursive "
	  "doubling among the leaders of pairs (one round more each way, half the messages: "
	  "what counts where members share cores); 0 as dissemination and plain recursive "
	  "doubling; 2 chooses per group: pairs when more than twice as many of its members are "
	  "on this host as it has processors online (default: 2)" },
	{ "ring_slots", &layer_settings.ring_slots, 0, 4096,
	  "Over a connected core that writes (tcp), the 128-byte slots each side of a busy "
	  "connection lends the other (rounded down to a power of two), which the peer fills "
	  "with its messages of up to 120 bytes by the core's RMA writes: no completion at "
	  "either end of the core; 0: every message goes as a message (default: 64)" },
	{ "ring_active", &layer_settings.ring_active, 0, 65536,
	  "Over a connected core that writes (tcp), the connections of an endpoint that may "
	  "have rings at once; 0: none (default: 64 over tcp of libfabric 1.17, whose CQs "
	  "signal every completion, 0 from 1.18 on, where rings cost more than they save)" },
	{ "ring_earn", &layer_settings.ring_earn, 1, (size_t) 1 << 31,
	  "Messages received on a connection within ring_idle milliseconds that earn it a "
	  "ring (default: 16)" },
	{ "ring_idle", &layer_settings.ring_idle_ms, 1, (size_t) 1 << 31,
	  "Milliseconds after which a ring whose slots went unused is given back (default: "
	  "1000)" },
	{ "cq_group", &layer_settings.cq_group, 0, 65536,
	  "Over a connected core whose CQ reads walk every connection bound to them (tcp of "
	  "libfabric 1.17), the connections that share one core CQ: a progress call reads only "
	  "the CQs whose sockets have something, or on whose connections something was sent, "
	  "so that idle peers cost it nothing; 0: one CQ for all, read on every call "
	  "(default: 32 over tcp of libfabric 1.17, 0 elsewhere)" },
	{ "direct_rma", &layer_settings.direct_rma, 0, 1,
	  "Over a connected core with RMA (tcp), a target that has checked a peer's write or "
	  "read of one of its regions tells the peer how the core names that region, and the "
	  "peer's later writes and reads inside it go on the core's own RMA: no message, "
	  "completion or answer at the target. 0: every RMA request goes as a message "
	  "(default: 1)" },
	{ "peer_timeout", &layer_settings.peer_timeout_ms, 100, (size_t) 1 << 31,
	  "Milliseconds a peer may stay silent while something waits on it (over a datagram "
	  "core: while what was sent to it is unacknowledged) before it is declared lost and "
	  "everything outstanding with it fails with FI_EHOSTUNREACH. A peer answers only "
	  "while its process progresses (manual progress): longer than any pause between "
	  "its calls (default: 30000)" },
	{ "keepalive", &layer_settings.keepalive_ms, 0, (size_t) 1 << 31,
	  "Milliseconds of silence after which such a peer is probed (over a datagram core: "
	  "any peer with a session), so that one that vanished is found; 0: never, and a "
	  "peer that vanished is found only over a datagram core, by what it leaves "
	  "unacknowledged. Also how long fi_close waits for a silent peer to take what was "
	  "sent to it (the peer timeout when 0) (default: 1000)" },
	{ "cma_size", &layer_settings.cma_size, 0, (size_t) 1 << 40,
	  "To a peer on the same host whose process may read this one's memory (cross-memory "
	  "attach, process_vm_readv(2): the same user, or CAP_SYS_PTRACE), RMA writes and RMA "
	  "read answers from this many bytes, and atomic operands too large to travel with "
	  "their request, go by rendezvous, the peer copying the data straight from this "
	  "process's memory in one system call instead of through the core; 0: never, for "
	  "anything (this side neither offers its memory nor reads its peers') (default: "
	  "16384)" },
	{ "cma_msg_size", &layer_settings.cma_msg_size, 0, (size_t) 1 << 40,
	  "The same for messages, which go by rendezvous from this many bytes to such a peer "
	  "(a rendezvous costs an answer an eager message does without); 0: no message "
	  "(default: 65536)" },
	{ "progress_idle", &layer_settings.progress_idle_ms, 1, 1000,
	  "With FI_PROGRESS_AUTO, milliseconds after the application's last progress call on "
	  "an endpoint (a read of its CQs or counters) before the domain's progress thread "
	  "serves it: while the application calls, the thread stays out of its way, looking "
	  "again at doubling intervals up to 32 times this (default: 1)" },
	{ "dgram_mtu", &layer_dgram_settings.mtu, 0, 65000,
	  "Over a datagram core: bytes per datagram; 0 takes the core's max_msg_size (udp: "
	  "1472, an Ethernet frame). Larger values fragment in IP unless the path carries "
	  "them, as loopback does (default: 0)" },
	{ "dgram_window", &layer_dgram_settings.window, 64, 4096,
	  "Over a datagram core: packets a peer may have unacknowledged, and the most the "
	  "congestion window grows to (default: 256)" },
};

static void layer_read_params(void)
{
	size_t i, value;

	for (i = 0; i < UTIL_ARRAY_SIZE(layer_params); i++) {
		const struct layer_param *p = &layer_params[i];

		fi_param_define(&layer_prov, p->name, FI_PARAM_SIZE_T, "%s", p->help);
		if (fi_param_get_size_t(&layer_prov, p->name, &value) != FI_SUCCESS)
			continue;
		if (value < p->min || value > p->max) {
			FI_WARN(&layer_prov, FI_LOG_CORE,
				"FI_OFI_LAYER_%s=%zu out of range [%zu, %zu], keeping %zu\n",
				p->name, value, p->min, p->max, *p->value);
			continue;
		}
		*p->value = value;
	}
}

/* The progress model offered when the hints leave it open, and the thread's nice value. */
static void layer_read_progress(void)
{
	char *value = NULL;
	int nice;

	fi_param_define(&layer_prov, "progress", FI_PARAM_STRING, "%s",
			"Progress model fi_getinfo offers when the hints leave it unspecified: "
			"'manual' (the application's calls progress everything) or 'auto' (a "
			"thread per domain also serves peers while the application does not "
			"call) (default: manual)");
	fi_param_define(&layer_prov, "progress_nice", FI_PARAM_INT, "%s",
			"With FI_PROGRESS_AUTO, the progress thread's nice value (setpriority(2), "
			"-20 to 19): below the application's, the thread takes the processor from "
			"a computing application thread at once when a peer's request arrives; "
			"lowering it needs CAP_SYS_NICE or RLIMIT_NICE (default: 0, the process's)");
	if (fi_param_get_int(&layer_prov, "progress_nice", &nice) == FI_SUCCESS) {
		if (nice >= -20 && nice <= 19)
			layer_settings.progress_nice = nice;
		else
			FI_WARN(&layer_prov, FI_LOG_CORE, "FI_OFI_LAYER_PROGRESS_NICE=%d out of "
				"range [-20, 19], keeping 0\n", nice);
	}
	if (fi_param_get_str(&layer_prov, "progress", &value) != FI_SUCCESS || !value)
		return;
	if (!strcasecmp(value, "auto"))
		layer_settings.progress_auto = true;
	else if (strcasecmp(value, "manual"))
		FI_WARN(&layer_prov, FI_LOG_CORE, "FI_OFI_LAYER_PROGRESS=%s is not manual or "
			"auto, keeping manual\n", value);
}

/* Which kind of core endpoint to run over. */
static void layer_read_core_choice(void)
{
	char *value = NULL;

	fi_param_define(&layer_prov, "core_ep_type", FI_PARAM_STRING, "%s",
			"Kind of core endpoint to run over: 'msg' (connected endpoints), 'rdm' "
			"(reliable-datagram endpoints), 'dgram' (datagram endpoints, made reliable "
			"by ofi_layer), or 'auto': msg when the core offers it, rdm otherwise and "
			"for net and shm, dgram for udp (default: auto)");
	if (fi_param_get_str(&layer_prov, "core_ep_type", &value) != FI_SUCCESS || !value)
		return;
	if (!strcasecmp(value, "msg"))
		layer_settings.core_choice = LAYER_CORE_MSG;
	else if (!strcasecmp(value, "rdm"))
		layer_settings.core_choice = LAYER_CORE_RDM;
	else if (!strcasecmp(value, "dgram"))
		layer_settings.core_choice = LAYER_CORE_DGRAM;
	else if (strcasecmp(value, "auto"))
		FI_WARN(&layer_prov, FI_LOG_CORE, "FI_OFI_LAYER_CORE_EP_TYPE=%s is not msg, rdm, "
			"dgram or auto, keeping auto\n", value);
}

FI_EXT_INI
{
	uint32_t loaded = fi_version();
	char *value = NULL;

	util_prov = &layer_prov;
	/* Structures grow at their ends from release to release: an older library's are too
	 * short for a provider built against newer headers. */
	if (FI_VERSION_LT(loaded, LAYER_FI_VERSION)) {
		FI_WARN(&layer_prov, FI_LOG_CORE,
			"built against libfabric %u.%u, loaded by the older %u.%u: not loaded "
			"(rebuild ofi_layer against this libfabric)\n",
			FI_MAJOR(LAYER_FI_VERSION), FI_MINOR(LAYER_FI_VERSION), FI_MAJOR(loaded),
			FI_MINOR(loaded));
		return NULL;
	}
	layer_read_params();
	layer_read_core_choice();
	layer_read_progress();
	fi_param_define(&layer_prov, "dgram_fault", FI_PARAM_STRING, "%s",
			"For tests only: 'drop=P,dup=P,reorder=P,seed=S' drops, duplicates and "
			"reorders P percent of the datagrams a datagram core sends (default: off)");
	if (fi_param_get_str(&layer_prov, "dgram_fault", &value) == FI_SUCCESS)
		layer_dgram_settings.fault = value;
	return &layer_prov;
}
