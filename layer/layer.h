/*
 * ofi_layer: provider-wide definitions: the provider object, its settings, and the limits
 * every object shares. Each object has a header of its own (fabric.h, domain.h, cq.h...,
 * av/av.h, ep/ep.h).
 */
#ifndef LAYER_LAYER_H
#define LAYER_LAYER_H

#include <stdatomic.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
#include <rdma/fi_ext_layer.h>

#include "util/util.h"
#include "util/list.h"
#include "util/lock.h"

#define LAYER_PROV_NAME "ofi_layer"
#define LAYER_PROV_VERSION FI_VERSION(0, 1)
/*
 * The API the provider serves: that of the headers it is built against. libfabric skips a
 * provider whose fi_version is below the version an application asks for, and a provider
 * built against newer headers than the library that loads it would read past the end of
 * that library's structures, so init refuses to load into an older library (init.c).
 */
#define LAYER_FI_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

/*
 * The legacy mr_mode values of fi_mr(3) (FI_MR_BASIC, FI_MR_SCALABLE): applications of the
 * 1.x API still pass them, but libfabric 2.x headers deprecate the macros with a compiler
 * warning, so the provider names them itself.
 */
#define LAYER_MR_BASIC (1 << 0)
#define LAYER_MR_SCALABLE (1 << 1)

/*
 * libfabric core's OFI_CORE_PROV_ONLY getinfo flag (1ULL << 59, unchanged from 1.11 to 2.x):
 * a utility provider asking for its core's infos passes it so that no utility provider
 * (itself included) is layered into the answer.
 */
#define LAYER_CORE_PROV_ONLY (1ULL << 59)

extern struct fi_provider layer_prov;

/*
 * For what a peer or an application can repeat at will: a warning the first time, then the
 * same at info level, so that nothing floods the log (each call site remembers on its own).
 * Counted drops say how many there were (fi_getopt, FI_OPT_LAYER_*).
 */
#define LAYER_WARN_ONCE(subsys, ...)                                                       \
	do {                                                                               \
		static atomic_flag layer_is_warned_ = ATOMIC_FLAG_INIT;                    \
		/* once: FI_LOG evaluates its level twice */                               \
		enum fi_log_level layer_level_ = atomic_flag_test_and_set(&layer_is_warned_) ? \
						 FI_LOG_INFO : FI_LOG_WARN;                \
		FI_LOG(&layer_prov, layer_level_, subsys, __VA_ARGS__);                    \
	} while (0)

/* Which kind of core endpoint the provider runs over (FI_OFI_LAYER_CORE_EP_TYPE). */
enum layer_core_choice {
	LAYER_CORE_AUTO,      /* MSG when the core has it, else RDM; net and shm: RDM */
	LAYER_CORE_MSG,       /* connected endpoints only */
	LAYER_CORE_RDM,       /* reliable-datagram endpoints only */
	LAYER_CORE_DGRAM,     /* datagram endpoints, made reliable (dgram/); udp: always */
};

/* Tunables, read once at provider init from FI_OFI_LAYER_* (see man/fi_layer.7). */
struct layer_settings {
	enum layer_core_choice core_choice;
	size_t eager_size;    /* largest payload sent inline; larger ones use rendezvous */
	size_t rx_buf_cnt;    /* a quarter of the receive buffers an endpoint keeps posted */
	size_t tx_size;       /* default transmit queue depth */
	size_t rx_size;       /* default receive queue depth */
	size_t cq_batch;      /* core completions read per progress call */
	size_t unexp_max;     /* bytes an endpoint's unexpected messages may hold
			       * (proto/unexp.c) */
	size_t direct_recv;   /* tcp core: let the core place payloads (core/core_msg.c); 0: off */
	size_t direct_eager_size; /* with direct receive: the largest eager payload accepted */
	size_t rma_eager_size; /* with direct receive: the largest RMA data with its header */
	size_t mr_cache_size; /* rendezvous registrations kept for reuse (mr.c); 0: none */
	size_t coll_large_size; /* collectives: bytes from which bandwidth algorithms run */
	size_t coll_ring_allgather_size; /* allgather: bytes of result from which a ring runs */
	size_t coll_paired;   /* barrier, small allreduce over pairs: 0, 1, 2 (per group) */
	size_t coll_segment_size; /* large broadcasts: the segments pipelined down the tree */
	size_t ring_slots;    /* MSG core: slots a busy connection lends its peer (core/ring.h) */
	size_t ring_active;   /* MSG core: connections with rings at most; SIZE_MAX: the
			       * runtime's default */
	size_t ring_earn;     /* MSG core: messages within ring_idle_ms that earn a ring */
	size_t ring_idle_ms;  /* MSG core: unused this long, a ring is given back */
	size_t cq_group;      /* MSG core: connections per core CQ (core/core_msg_cq.c); 0: one
			       * CQ; SIZE_MAX: the core's default */
	size_t direct_rma;    /* MSG core: grant peers the core's keys (rma/grant.h); 0: off */
	size_t peer_timeout_ms; /* liveness: a peer silent this long while something waits on
				 * it is lost (conn/liveness.c, dgram/) */
	size_t keepalive_ms;  /* liveness: such a peer is probed after this much silence */
	size_t cma_size;      /* bytes from which RMA data to a peer on the host goes by
			       * cross-memory attach (cma/cma.h); 0: nothing does */
	size_t cma_msg_size;  /* the same for messages; 0: no message */
	bool progress_auto;   /* FI_PROGRESS_AUTO when the hints leave progress open */
	size_t progress_idle_ms; /* the progress thread leaves an endpoint alone this long
				  * after its application progressed it (progress.h) */
	int progress_nice;    /* the progress thread's nice value; 0: the process's */
};
extern struct layer_settings layer_settings;

/* How long fi_close waits on a silent peer to take what was sent to it: a keepalive period,
 * or the peer timeout without keepalives (fi_layer(7), the datagram transport, Close). */
static inline size_t layer_close_wait_ms(void)
{
	return layer_settings.keepalive_ms ? layer_settings.keepalive_ms :
					     layer_settings.peer_timeout_ms;
}

/* Capabilities the endpoint implements; fi_getinfo never advertises more. */
#define LAYER_EP_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE | \
		       FI_DIRECTED_RECV | FI_MULTI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM | \
		       FI_COLLECTIVE | LAYER_RMA_CAPS)
/* RMA (rma/rma.h) and atomics (atomic/atomic.h): the initiator's and the target's sides,
 * remote events counted. */
#define LAYER_RMA_CAPS (FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | \
			FI_REMOTE_WRITE | FI_RMA_EVENT)
/* All 64 tag bits take part in matching; reported when the hints give no format. */
#define LAYER_MEM_TAG_FORMAT 0xAAAAAAAAAAAAAAAAULL
/* FI_SHARED_AV: named AVs (layer/av_shm.c). */
#define LAYER_DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV)
/* Default op_flags an endpoint takes: FI_INJECT makes every send an inject (at most
 * LAYER_INJECT_SIZE bytes, completed as bound). */
#define LAYER_TX_OP_FLAGS (FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | \
			   FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE)
#define LAYER_RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)
/* Protocol header bytes in front of every eager payload (layer/proto.h checks it). */
#define LAYER_HDR_SIZE 40
#define LAYER_INJECT_SIZE 256
#define LAYER_MAX_MSG_SIZE (1ULL << 32)
#define LAYER_IOV_LIMIT 4
/*
 * Atomics up to this many bytes of target memory are applied in the order they were issued
 * to a target (FI_ORDER_ATOMIC_RAR, _RAW, _WAR, _WAW; max_order_*_size): they travel whole
 * in one message (the compare form's operands and compare values with the description fit
 * LAYER_INJECT_SIZE, which every peer takes), over a connection that keeps their order, and
 * the target applies each as it arrives.
 */
#define LAYER_ATOMIC_ORDER (FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | \
			    FI_ORDER_ATOMIC_WAW)
#define LAYER_ATOMIC_ORDER_SIZE 112
/* The most target memory one atomic operation touches (fi_atomicvalid's count times the
 * datatype's size): its operands, results and compare values are held whole at both ends. */
#define LAYER_ATOMIC_MAX_SIZE (64ULL << 20)
/* The most a peer's handshake makes us send eager: FI_OFI_LAYER_DIRECT_EAGER_SIZE's maximum. */
#define LAYER_EAGER_MAX (16u << 20)
/*
 * FI_ADDR_STR cores (shm): an address is the core's NUL-terminated name, zero-padded to this
 * fixed size so that addresses compare bytewise; a longer name is refused.
 */
#define LAYER_ADDR_STR_LEN 48
/* Largest endpoint address the provider handles (struct sockaddr_in6, an FI_ADDR_STR name). */
#define LAYER_ADDR_MAX LAYER_ADDR_STR_LEN

/*
 * An authorization key (fi_domain(3), fi_endpoint(3), fi_av(3) 1.20): an opaque string of 1
 * to LAYER_AUTH_KEY_MAX bytes, compared byte for byte with its length; len 0 is no key.
 */
#define LAYER_AUTH_KEY_MAX FI_LAYER_AUTH_KEY_MAX_SIZE

struct layer_key {
	uint8_t len;
	uint8_t bytes[LAYER_AUTH_KEY_MAX];
};

static inline bool layer_key_equal(const struct layer_key *a, const struct layer_key *b)
{
	return a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

/*
 * Whether an auth_key / auth_key_size attribute pair is one the provider takes: none, a key
 * of 1 to LAYER_AUTH_KEY_MAX bytes, or (a domain's, is_domain) FI_AV_AUTH_KEY with no key.
 */
static inline bool layer_auth_key_attr_ok(const uint8_t *key, size_t size, bool is_domain)
{
	if (!size)
		return !key;
	if (size == FI_AV_AUTH_KEY)
		return is_domain && !key;
	return key && size <= LAYER_AUTH_KEY_MAX;
}

/* getinfo.c */
int layer_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		  const struct fi_info *hints, struct fi_info **info);
/* Capabilities with the defaults fi_getinfo(3) implies (both directions, both scopes). */
uint64_t layer_default_caps(uint64_t caps);
/* The core info a layer info was built from (found again by fabric/domain names). */
int layer_get_core_info(uint32_t version, const struct fi_info *layer_info,
			struct fi_info **core_info);

#endif /* LAYER_LAYER_H */
