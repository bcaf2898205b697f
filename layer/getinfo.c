/*
 * fi_getinfo for ofi_layer: every usable core info becomes one FI_EP_RDM info whose
 * attributes are derived from the core's and from the application's hints. Hints the
 * provider cannot satisfy give no info (libfabric then reports -FI_ENODATA).
 *
 * The kind of core endpoint is settled here, per core, and found again the same way when the
 * domain opens (layer_get_core_info): connected (FI_EP_MSG) endpoints when the core has them,
 * reliable-datagram (FI_EP_RDM) ones otherwise, and always for the cores listed in
 * layer_rdm_cores; datagram (FI_EP_DGRAM) ones for the cores in layer_dgram_cores, made
 * reliable by the datagram transport (dgram/dgram.h); FI_OFI_LAYER_CORE_EP_TYPE forces one
 * kind.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>

#include <rdma/fi_ext_layer.h>

#include "layer/layer.h"

/* Cores ofi_layer runs over when the application names none. sockets is used if named. */
static const char *const layer_default_cores[] = { "tcp" };

/*
 * Cores run over their RDM endpoints even though they may offer MSG ones: net's RDM endpoint
 * manages its connections itself (its MSG endpoints add nothing), shm has no MSG endpoints.
 * sockets keeps its MSG endpoints unless FI_OFI_LAYER_CORE_EP_TYPE=rdm.
 */
static const char *const layer_rdm_cores[] = { "net", "shm" };

/* Cores that offer only unreliable datagrams: udp. */
static const char *const layer_dgram_cores[] = { "udp" };

/* Memory registration modes the provider can honour towards the core. */
#define LAYER_CORE_MR_MODE (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED)

/*
 * The core named in a prov_name such as "tcp;ofi_layer" or "ofi_layer;tcp": copies it into
 * core (size len) and returns 0; -FI_ENODATA when prov_name names another utility provider or
 * does not name ofi_layer at all while naming something else.
 */
static int layer_core_name(const char *prov_name, char *core, size_t len)
{
	char buf[128], *tok, *save = NULL;
	bool has_layer = false;

	core[0] = '\0';
	if (!prov_name)
		return 0;
	if (strlen(prov_name) >= sizeof(buf))
		return -FI_ENODATA;
	strcpy(buf, prov_name);
	for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		if (!strcasecmp(tok, LAYER_PROV_NAME)) {
			has_layer = true;
		} else if (!core[0] && strncasecmp(tok, "ofi_", 4) && tok[0] != '^') {
			if (strlen(tok) >= len)
				return -FI_ENODATA;
			strcpy(core, tok);
		} else {
			return -FI_ENODATA;
		}
	}
	/* "tcp" alone asks for the core itself, not for a layer over it. */
	return has_layer ? 0 : -FI_ENODATA;
}

/*
 * The core endpoint types to ask core for, in order of preference (types has room for two):
 * returns how many.
 */
static size_t layer_core_ep_types(const char *core, enum fi_ep_type *types)
{
	size_t i;

	switch (layer_settings.core_choice) {
	case LAYER_CORE_MSG:
		types[0] = FI_EP_MSG;
		return 1;
	case LAYER_CORE_RDM:
		types[0] = FI_EP_RDM;
		return 1;
	case LAYER_CORE_DGRAM:
		types[0] = FI_EP_DGRAM;
		return 1;
	case LAYER_CORE_AUTO:
		break;
	}
	for (i = 0; i < UTIL_ARRAY_SIZE(layer_dgram_cores); i++) {
		if (!strcasecmp(core, layer_dgram_cores[i])) {
			types[0] = FI_EP_DGRAM;
			return 1;
		}
	}
	for (i = 0; i < UTIL_ARRAY_SIZE(layer_rdm_cores); i++) {
		if (!strcasecmp(core, layer_rdm_cores[i])) {
			types[0] = FI_EP_RDM;
			return 1;
		}
	}
	types[0] = FI_EP_MSG;
	types[1] = FI_EP_RDM;
	return 2;
}

/*
 * What the endpoint needs of the core: RMA reads for rendezvous (a datagram core's are the
 * transport's own) and, from a core without connections, the source of every message it
 * receives.
 */
static uint64_t layer_core_caps(enum fi_ep_type type)
{
	uint64_t caps = FI_MSG | FI_SEND | FI_RECV;

	switch (type) {
	case FI_EP_DGRAM:
		return caps | FI_SOURCE;
	case FI_EP_RDM:
		return caps | FI_RMA | FI_READ | FI_REMOTE_READ | FI_SOURCE;
	default:
		return caps | FI_RMA | FI_READ | FI_REMOTE_READ;
	}
}

/* Builds the hints for the core's fi_getinfo from the application's hints. */
static struct fi_info *layer_core_hints(const struct fi_info *hints, const char *core,
					enum fi_ep_type type)
{
	struct fi_info *core_hints;
	char name[160];

	core_hints = fi_allocinfo();
	if (!core_hints)
		return NULL;

	core_hints->caps = layer_core_caps(type);
	core_hints->ep_attr->type = type;
	core_hints->domain_attr->mr_mode = LAYER_CORE_MR_MODE;
	core_hints->domain_attr->threading = FI_THREAD_SAFE;
	core_hints->mode = 0;
	snprintf(name, sizeof(name), "%s;^%s", core, LAYER_PROV_NAME);
	core_hints->fabric_attr->prov_name = strdup(name);
	if (!core_hints->fabric_attr->prov_name)
		goto err_free;

	if (!hints)
		return core_hints;

	core_hints->addr_format = hints->addr_format;
	if (hints->src_addr) {
		core_hints->src_addr = malloc(hints->src_addrlen);
		if (!core_hints->src_addr)
			goto err_free;
		memcpy(core_hints->src_addr, hints->src_addr, hints->src_addrlen);
		core_hints->src_addrlen = hints->src_addrlen;
	}
	if (hints->dest_addr) {
		core_hints->dest_addr = malloc(hints->dest_addrlen);
		if (!core_hints->dest_addr)
			goto err_free;
		memcpy(core_hints->dest_addr, hints->dest_addr, hints->dest_addrlen);
		core_hints->dest_addrlen = hints->dest_addrlen;
	}
	if (hints->fabric_attr && hints->fabric_attr->name) {
		core_hints->fabric_attr->name = strdup(hints->fabric_attr->name);
		if (!core_hints->fabric_attr->name)
			goto err_free;
	}
	if (hints->domain_attr && hints->domain_attr->name) {
		core_hints->domain_attr->name = strdup(hints->domain_attr->name);
		if (!core_hints->domain_attr->name)
			goto err_free;
	}
	return core_hints;

err_free:
	fi_freeinfo(core_hints);
	return NULL;
}

uint64_t layer_default_caps(uint64_t caps)
{
	/* fi_getinfo(3): FI_RMA or FI_ATOMIC without a direction means all four */
	if ((caps & (FI_RMA | FI_ATOMIC)) &&
	    !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
		caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (!(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	if (!(caps & (FI_LOCAL_COMM | FI_REMOTE_COMM)))
		caps |= FI_LOCAL_COMM | FI_REMOTE_COMM;
	return caps;
}

/*
 * A hint the provider cannot meet: logged at info level with the reason, since fi_getinfo
 * itself only says -FI_ENODATA. Returns false, for the caller to return.
 */
static bool layer_hint_refused(const char *what, uint64_t value)
{
	FI_INFO(&layer_prov, FI_LOG_CORE, "no info: the hints ask for %s (%#" PRIx64 ")\n", what,
		value);
	return false;
}

static bool layer_ep_hints_ok(const struct fi_ep_attr *ep, const struct fi_domain_attr *da,
			      bool has_keys)
{
	if (ep->type != FI_EP_UNSPEC && ep->type != FI_EP_RDM)
		return layer_hint_refused("an endpoint type other than FI_EP_RDM", ep->type);
	if (ep->max_msg_size > LAYER_MAX_MSG_SIZE)
		return layer_hint_refused("max_msg_size above 4 GiB", ep->max_msg_size);
	if (ep->tx_ctx_cnt > 1 || ep->rx_ctx_cnt > 1)
		return layer_hint_refused("more than one transmit or receive context",
					  UTIL_MAX(ep->tx_ctx_cnt, ep->rx_ctx_cnt));
	/* an endpoint's own key; not with keys from the AV (fi_av(3) 1.20) */
	if (has_keys && !layer_auth_key_attr_ok(ep->auth_key, ep->auth_key_size, false))
		return layer_hint_refused("an endpoint auth_key that is not 1 to 32 bytes",
					  ep->auth_key_size);
	if (has_keys && ep->auth_key_size && da && da->auth_key_size == FI_AV_AUTH_KEY)
		return layer_hint_refused("an endpoint auth_key with FI_AV_AUTH_KEY",
					  ep->auth_key_size);
	if (ep->protocol != FI_PROTO_UNSPEC)
		return layer_hint_refused("a protocol", ep->protocol);
	return true;
}

static bool layer_tx_hints_ok(const struct fi_tx_attr *tx)
{
	if (tx->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS))
		return layer_hint_refused("tx_attr->caps the provider does not offer",
					  tx->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS));
	if (tx->op_flags & ~LAYER_TX_OP_FLAGS)
		return layer_hint_refused("tx_attr->op_flags the provider does not take",
					  tx->op_flags & ~LAYER_TX_OP_FLAGS);
	if (tx->inject_size > LAYER_INJECT_SIZE)
		return layer_hint_refused("an inject_size above 256 bytes", tx->inject_size);
	if (tx->iov_limit > LAYER_IOV_LIMIT)
		return layer_hint_refused("a tx iov_limit above 4", tx->iov_limit);
	if (tx->rma_iov_limit > 1)
		return layer_hint_refused("an rma_iov_limit above 1", tx->rma_iov_limit);
	if (tx->msg_order & ~(FI_ORDER_SAS | LAYER_ATOMIC_ORDER))
		return layer_hint_refused("tx msg_order beyond FI_ORDER_SAS and atomics' order",
					  tx->msg_order & ~(FI_ORDER_SAS | LAYER_ATOMIC_ORDER));
	if (tx->comp_order)
		return layer_hint_refused("a tx comp_order", tx->comp_order);
	if (tx->size > (1 << 20))
		return layer_hint_refused("a tx_attr->size above 2^20", tx->size);
	return true;
}

static bool layer_rx_hints_ok(const struct fi_rx_attr *rx)
{
	if (rx->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS))
		return layer_hint_refused("rx_attr->caps the provider does not offer",
					  rx->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS));
	if (rx->op_flags & ~LAYER_RX_OP_FLAGS)
		return layer_hint_refused("rx_attr->op_flags the provider does not take",
					  rx->op_flags & ~LAYER_RX_OP_FLAGS);
	if (rx->iov_limit > LAYER_IOV_LIMIT)
		return layer_hint_refused("an rx iov_limit above 4", rx->iov_limit);
	if (rx->msg_order & ~(FI_ORDER_SAS | LAYER_ATOMIC_ORDER))
		return layer_hint_refused("rx msg_order beyond FI_ORDER_SAS and atomics' order",
					  rx->msg_order & ~(FI_ORDER_SAS | LAYER_ATOMIC_ORDER));
	if (rx->comp_order)
		return layer_hint_refused("an rx comp_order", rx->comp_order);
	if (rx->total_buffered_recv)
		return layer_hint_refused("total_buffered_recv", rx->total_buffered_recv);
	if (rx->size > (1 << 20))
		return layer_hint_refused("an rx_attr->size above 2^20", rx->size);
	return true;
}

static bool layer_domain_hints_ok(const struct fi_domain_attr *da, bool has_keys)
{
	if (da->av_type != FI_AV_UNSPEC && da->av_type != FI_AV_TABLE && da->av_type != FI_AV_MAP)
		return layer_hint_refused("an unknown av_type", da->av_type);
	if (da->caps & ~LAYER_DOMAIN_CAPS)
		return layer_hint_refused("domain caps the provider does not offer",
					  da->caps & ~LAYER_DOMAIN_CAPS);
	/* a default key, or keys from the AV (FI_AV_AUTH_KEY, fi_av(3) 1.20) */
	if (has_keys && !layer_auth_key_attr_ok(da->auth_key, da->auth_key_size, true))
		return layer_hint_refused("a domain auth_key that is not 1 to 32 bytes nor "
					  "FI_AV_AUTH_KEY", da->auth_key_size);
	if (da->cq_data_size > sizeof(uint64_t))
		return layer_hint_refused("cq_data_size above 8 bytes", da->cq_data_size);
	if (da->max_ep_stx_ctx || da->max_ep_srx_ctx)
		return layer_hint_refused("shared contexts",
					  UTIL_MAX(da->max_ep_stx_ctx, da->max_ep_srx_ctx));
	/* The two legacy modes exclude each other. */
	if ((da->mr_mode & (LAYER_MR_BASIC | LAYER_MR_SCALABLE)) ==
	    (LAYER_MR_BASIC | LAYER_MR_SCALABLE))
		return layer_hint_refused("both FI_MR_BASIC and FI_MR_SCALABLE", da->mr_mode);
	if (da->resource_mgmt == FI_RM_DISABLED)
		return layer_hint_refused("FI_RM_DISABLED", da->resource_mgmt);
	return true;
}

/* Whether the provider can meet the hints; each refusal is logged with its reason. */
static bool layer_hints_ok(uint32_t version, const struct fi_info *hints)
{
	/* fi_domain(3), fi_endpoint(3): the key fields count from API 1.5 on */
	bool has_keys = !FI_VERSION_LT(version, FI_VERSION(1, 5));

	if (hints->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS))
		return layer_hint_refused("capabilities the provider does not offer",
					  hints->caps & ~(LAYER_EP_CAPS | LAYER_DOMAIN_CAPS));
	return (!hints->ep_attr || layer_ep_hints_ok(hints->ep_attr, hints->domain_attr, has_keys)) &&
	       (!hints->tx_attr || layer_tx_hints_ok(hints->tx_attr)) &&
	       (!hints->rx_attr || layer_rx_hints_ok(hints->rx_attr)) &&
	       (!hints->domain_attr || layer_domain_hints_ok(hints->domain_attr, has_keys));
}

/* Copies a key attribute of the hints into an info's (fi_freeinfo frees it). */
static int layer_copy_auth_key(const uint8_t *key, size_t size, uint8_t **out_key,
			       size_t *out_size)
{
	*out_key = NULL;
	*out_size = size;
	if (!key)
		return 0;
	*out_key = malloc(size);
	if (!*out_key)
		return -FI_ENOMEM;
	memcpy(*out_key, key, size);
	return 0;
}

/* A progress model offered for a hint: the hint's, or the default for FI_PROGRESS_UNSPEC. */
static enum fi_progress layer_progress_model(enum fi_progress hint)
{
	if (hint != FI_PROGRESS_UNSPEC)
		return hint;
	return layer_settings.progress_auto ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
}

/* mr_mode granted to the application: the provider needs none of the optional bits. */
static int layer_mr_mode(uint32_t version, const struct fi_info *hints)
{
	int mode = hints && hints->domain_attr ? hints->domain_attr->mr_mode : 0;

	/* Legacy modes are answered in kind; the core's registrations honour either. */
	if (mode == LAYER_MR_BASIC || mode == LAYER_MR_SCALABLE)
		return mode;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		return LAYER_MR_SCALABLE;
	/* FI_MR_RAW, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT... are never required. */
	return 0;
}

/* The layer info built from one core info. */
static struct fi_info *layer_info_from_core(uint32_t version, const struct fi_info *hints,
					    const struct fi_info *core)
{
	struct fi_info *info;
	uint64_t caps;

	info = fi_dupinfo(core);
	if (!info)
		return NULL;

	caps = hints && hints->caps ? layer_default_caps(hints->caps) : LAYER_EP_CAPS;
	info->caps = caps;
	info->mode = 0;
	/* dest_addr stays: the peer that node/service named (fi_getinfo(3)), an endpoint
	 * address as fi_av_insert takes it; applications insert it to reach their server. */
	info->handle = NULL;

	/* the attrs hold transmit or receive caps only: domain ones are the info's */
	info->tx_attr->caps = caps & ~(FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV | FI_SOURCE |
				       FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT |
				       LAYER_DOMAIN_CAPS);
	info->tx_attr->mode = 0;
	info->tx_attr->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
	info->tx_attr->msg_order = FI_ORDER_SAS | (caps & FI_ATOMIC ? LAYER_ATOMIC_ORDER : 0);
	info->tx_attr->comp_order = 0; /* none (FI_ORDER_NONE) */
	info->tx_attr->inject_size = LAYER_INJECT_SIZE;
	info->tx_attr->size = hints && hints->tx_attr && hints->tx_attr->size ?
			      hints->tx_attr->size : layer_settings.tx_size;
	info->tx_attr->iov_limit = LAYER_IOV_LIMIT;
	info->tx_attr->rma_iov_limit = caps & (FI_RMA | FI_ATOMIC) ? 1 : 0;

	info->rx_attr->caps = caps & ~(FI_SEND | FI_READ | FI_WRITE | LAYER_DOMAIN_CAPS);
	info->rx_attr->mode = 0;
	info->rx_attr->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
	info->rx_attr->msg_order = FI_ORDER_SAS | (caps & FI_ATOMIC ? LAYER_ATOMIC_ORDER : 0);
	info->rx_attr->comp_order = 0; /* none (FI_ORDER_NONE) */
	info->rx_attr->total_buffered_recv = 0;
	info->rx_attr->size = hints && hints->rx_attr && hints->rx_attr->size ?
			      hints->rx_attr->size : layer_settings.rx_size;
	info->rx_attr->iov_limit = LAYER_IOV_LIMIT;

	info->ep_attr->type = FI_EP_RDM;
	info->ep_attr->protocol = FI_PROTO_UNSPEC;
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = LAYER_MAX_MSG_SIZE;
	info->ep_attr->msg_prefix_size = 0;
	info->ep_attr->max_order_raw_size = caps & FI_ATOMIC ? LAYER_ATOMIC_ORDER_SIZE : 0;
	info->ep_attr->max_order_war_size = caps & FI_ATOMIC ? LAYER_ATOMIC_ORDER_SIZE : 0;
	info->ep_attr->max_order_waw_size = caps & FI_ATOMIC ? LAYER_ATOMIC_ORDER_SIZE : 0;
	info->ep_attr->mem_tag_format = !(caps & FI_TAGGED) ? 0 :
		hints && hints->ep_attr && hints->ep_attr->mem_tag_format ?
		hints->ep_attr->mem_tag_format : LAYER_MEM_TAG_FORMAT;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;

	info->domain_attr->caps = LAYER_DOMAIN_CAPS;
	info->domain_attr->mode = 0;
	info->domain_attr->threading =
		hints && hints->domain_attr && hints->domain_attr->threading ?
		hints->domain_attr->threading : FI_THREAD_SAFE;
	/* as asked; FI_OFI_LAYER_PROGRESS when the hints leave it open (progress.h) */
	info->domain_attr->control_progress = layer_progress_model(
		hints && hints->domain_attr ? hints->domain_attr->control_progress : 0);
	info->domain_attr->data_progress = layer_progress_model(
		hints && hints->domain_attr ? hints->domain_attr->data_progress : 0);
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type =
		hints && hints->domain_attr && hints->domain_attr->av_type ?
		hints->domain_attr->av_type : FI_AV_UNSPEC;
	info->domain_attr->mr_mode = layer_mr_mode(version, hints);
	info->domain_attr->cq_data_size = sizeof(uint64_t);
	info->domain_attr->max_ep_tx_ctx = 1;
	info->domain_attr->max_ep_rx_ctx = 1;
	info->domain_attr->max_ep_stx_ctx = 0;
	info->domain_attr->max_ep_srx_ctx = 0;
	info->domain_attr->cntr_cnt = 1024;
	if (core->ep_attr->type == FI_EP_DGRAM) {
		/* registrations are the provider's own map (mr.c), the core sees none */
		info->domain_attr->mr_iov_limit = LAYER_IOV_LIMIT;
		info->domain_attr->mr_cnt = 65536;
	}
	/* Keys as asked: FI_AV_AUTH_KEY, or a domain's or endpoint's key (fi_domain(3) and
	 * fi_endpoint(3): only from API 1.5 on). */
	free(info->domain_attr->auth_key);
	info->domain_attr->auth_key = NULL;
	info->domain_attr->auth_key_size = 0;
	free(info->ep_attr->auth_key);
	info->ep_attr->auth_key = NULL;
	info->ep_attr->auth_key_size = 0;
	if (hints && !FI_VERSION_LT(version, FI_VERSION(1, 5))) {
		if ((hints->domain_attr &&
		     layer_copy_auth_key(hints->domain_attr->auth_key,
					 hints->domain_attr->auth_key_size,
					 &info->domain_attr->auth_key,
					 &info->domain_attr->auth_key_size)) ||
		    (hints->ep_attr &&
		     layer_copy_auth_key(hints->ep_attr->auth_key, hints->ep_attr->auth_key_size,
					 &info->ep_attr->auth_key,
					 &info->ep_attr->auth_key_size))) {
			fi_freeinfo(info);
			return NULL;
		}
	}
	info->domain_attr->max_err_data = 0;
#if HAVE_STRUCT_FI_DOMAIN_ATTR_MAX_EP_AUTH_KEY
	/* 1.20: an endpoint holds every key its AV has when enabled (FI_AV_AUTH_KEY; key
	 * handles index 32 bits), else the one key of its domain or its own. */
	info->domain_attr->max_ep_auth_key =
		info->domain_attr->auth_key_size == FI_AV_AUTH_KEY ? UINT32_MAX : 1;
#endif

	/* libfabric appends ";ofi_layer" to the core's name. */
	info->fabric_attr->prov_version = LAYER_PROV_VERSION;
	info->fabric_attr->api_version = version;
	return info;
}

/* Whether the endpoint can run over a core info (the core may offer more than asked). */
static bool layer_core_info_ok(const struct fi_info *core)
{
	uint64_t caps = layer_core_caps(core->ep_attr->type);

	/* Rendezvous reads need RMA: a core without it cannot carry large messages. */
	if ((core->caps & caps) != caps)
		return false;
	if (core->addr_format == FI_SOCKADDR_IN || core->addr_format == FI_SOCKADDR_IN6)
		return true;
	/* Names (shm) travel in a HELLO; a connection request has room for a sockaddr only,
	 * and so does a datagram's header. */
	return core->addr_format == FI_ADDR_STR && core->ep_attr->type == FI_EP_RDM;
}

/*
 * The usable infos of one core, of the first endpoint type (layer_core_ep_types) that has
 * any: 0 and the list, or -FI_ENODATA (or another error of the core's fi_getinfo).
 */
static int layer_core_getinfo(const char *node, const char *service, uint64_t flags,
			      const struct fi_info *hints, const char *core,
			      struct fi_info **core_info)
{
	struct fi_info *core_hints, *found, *cur, *next, *head, **tail;
	enum fi_ep_type types[2];
	size_t i, type_cnt;
	int ret = -FI_ENODATA;

	type_cnt = layer_core_ep_types(core, types);
	for (i = 0; i < type_cnt; i++) {
		core_hints = layer_core_hints(hints, core, types[i]);
		if (!core_hints)
			return -FI_ENOMEM;
		ret = fi_getinfo(LAYER_FI_VERSION, node, service, flags | LAYER_CORE_PROV_ONLY,
				 core_hints, &found);
		fi_freeinfo(core_hints);
		if (ret == -FI_ENODATA)
			continue;
		if (ret)
			return ret;

		head = NULL;
		tail = &head;
		for (cur = found; cur; cur = next) {
			next = cur->next;
			cur->next = NULL;
			if (layer_core_info_ok(cur)) {
				*tail = cur;
				tail = &cur->next;
			} else {
				fi_freeinfo(cur);
			}
		}
		if (head) {
			*core_info = head;
			return 0;
		}
		ret = -FI_ENODATA;
	}
	return ret;
}

static int layer_getinfo_core(uint32_t version, const char *node, const char *service,
			      uint64_t flags, const struct fi_info *hints, const char *core,
			      struct fi_info **head, struct fi_info **tail)
{
	struct fi_info *core_info, *cur, *info;
	int ret;

	ret = layer_core_getinfo(node, service, flags, hints, core, &core_info);
	if (ret)
		return ret;

	for (cur = core_info; cur; cur = cur->next) {
		info = layer_info_from_core(version, hints, cur);
		if (!info) {
			ret = -FI_ENOMEM;
			break;
		}
		if (*tail)
			(*tail)->next = info;
		else
			*head = info;
		*tail = info;
	}
	fi_freeinfo(core_info);
	return ret;
}

/*
 * Without a core in the hints, the ones FI_PROVIDER names with ofi_layer ("net;ofi_layer"):
 * libfabric filters the answers by FI_PROVIDER but does not pass it down, so a core outside
 * the defaults would otherwise never be asked. Returns how many infos were added.
 */
static size_t layer_getinfo_env_cores(uint32_t version, const char *node, const char *service,
				      uint64_t flags, const struct fi_info *hints,
				      struct fi_info **head, struct fi_info **tail)
{
	const char *env = getenv("FI_PROVIDER");
	char buf[256], core[64], *tok, *save = NULL;
	size_t cnt = 0;

	if (!env || env[0] == '^' || strlen(env) >= sizeof(buf))
		return 0;
	strcpy(buf, env);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (layer_core_name(tok, core, sizeof(core)) || !core[0])
			continue;
		cnt++;
		layer_getinfo_core(version, node, service, flags, hints, core, head, tail);
	}
	return cnt;
}

int layer_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		  const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *head = NULL, *tail = NULL;
	char core[64];
	size_t i;
	int ret;

	if (!info)
		return -FI_EINVAL;
	*info = NULL;
	if (hints && !layer_hints_ok(version, hints))
		return -FI_ENODATA;
	ret = layer_core_name(hints && hints->fabric_attr ? hints->fabric_attr->prov_name : NULL,
			      core, sizeof(core));
	if (ret)
		return ret;

	if (core[0]) {
		ret = layer_getinfo_core(version, node, service, flags, hints, core, &head,
					 &tail);
	} else {
		ret = 0;
		if (layer_getinfo_env_cores(version, node, service, flags, hints, &head, &tail))
			goto out;
		for (i = 0; i < UTIL_ARRAY_SIZE(layer_default_cores); i++)
			layer_getinfo_core(version, node, service, flags, hints,
					   layer_default_cores[i], &head, &tail);
	}
out:
	if (!head) {
		fi_freeinfo(head);
		return ret && ret != -FI_ENODATA ? ret : -FI_ENODATA;
	}
	*info = head;
	return 0;
}

int layer_get_core_info(uint32_t version, const struct fi_info *layer_info,
			struct fi_info **core_info)
{
	struct fi_info *found = NULL;
	char core[64];
	int ret;

	(void) version;
	ret = layer_core_name(layer_info->fabric_attr->prov_name, core, sizeof(core));
	if (ret || !core[0])
		strcpy(core, layer_default_cores[0]);
	/* Keep the source address: the domain's endpoints listen on it. */
	ret = layer_core_getinfo(NULL, NULL, 0, layer_info, core, &found);
	if (ret)
		return ret;
	/* First answer only: the names and address in the hints select it. */
	fi_freeinfo(found->next);
	found->next = NULL;
	*core_info = found;
	return 0;
}
