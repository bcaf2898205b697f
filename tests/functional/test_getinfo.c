/*
 * fi_getinfo for the layered provider: both spellings of the name, the attributes an
 * application relies on, requirements it must refuse with -FI_ENODATA, and the fi_info tool.
 */
#include "config.h"

#include "common.h"

#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024ULL * 1024 * 1024)

static unsigned count_infos(const struct fi_info *info)
{
	unsigned n = 0;

	for (; info; info = info->next)
		n++;
	return n;
}

/* The checks every returned info must pass, whatever the hints. */
static void check_infos(const char *what, const struct fi_info *info)
{
	bool rdm = true, msg = true, name = true, inject = true, big = true, fmt = true;
	bool src = true, limits = true, is_shm = !strcmp(lt_core_name(), "shm");
	const struct fi_info *i;

	for (i = info; i; i = i->next) {
		const struct sockaddr_in *sin = i->src_addr;

		rdm &= i->ep_attr->type == FI_EP_RDM;
		msg &= (i->caps & FI_MSG) == FI_MSG;
		name &= i->fabric_attr->prov_name && !strcmp(i->fabric_attr->prov_name, lt_prov());
		inject &= i->tx_attr->inject_size <= i->ep_attr->max_msg_size;
		big &= i->ep_attr->max_msg_size >= GIB;
		if (is_shm) {
			/* shm's addresses are names ("fi_shm://...") */
			fmt &= i->addr_format == FI_ADDR_STR;
			src &= i->src_addr && !strncmp(i->src_addr, "fi_shm://", 9);
		} else {
			fmt &= i->addr_format == FI_SOCKADDR_IN;
			src &= sin && i->src_addrlen == sizeof(*sin) &&
			       sin->sin_family == AF_INET &&
			       sin->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
		}
		limits &= i->tx_attr->iov_limit >= 1 && i->rx_attr->iov_limit >= 1 &&
			  i->tx_attr->size >= 1 && i->rx_attr->size >= 1;
	}
	LT_CHECK(rdm, "%s: every info is FI_EP_RDM", what);
	LT_CHECK(msg, "%s: every info has FI_MSG in caps", what);
	LT_CHECK(name, "%s: fabric_attr->prov_name is \"%s\" (got \"%s\")", what, lt_prov(),
		 info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "(null)");
	LT_CHECK(inject, "%s: inject_size <= max_msg_size (%zu, %zu)", what,
		 info->tx_attr->inject_size, info->ep_attr->max_msg_size);
	LT_CHECK(big, "%s: max_msg_size >= 1 GiB (%zu)", what, info->ep_attr->max_msg_size);
	LT_CHECK(fmt, "%s: addr_format %s", what, is_shm ? "FI_ADDR_STR for shm" :
		 "FI_SOCKADDR_IN for " LT_NODE);
	LT_CHECK(src, "%s: src_addr is %s", what, is_shm ? "an fi_shm:// name" :
		 "a sockaddr_in for 127.0.0.1");
	LT_CHECK(limits, "%s: iov_limit and queue sizes are at least 1", what);
}

static void check_name_spelling(const char *prov_name)
{
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL;
	char what[128];
	int ret;

	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup(prov_name);
	snprintf(what, sizeof(what), "prov_name \"%s\"", prov_name);
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "%s: fi_getinfo succeeds", what) && info) {
		LT_CHECK(count_infos(info) >= 1, "%s: at least one info", what);
		check_infos(what, info);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* The same hints without a node: the provider still answers (for every interface it offers). */
static void check_no_node(void)
{
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL, *i;
	bool ok = true;
	int ret;

	ret = fi_getinfo(LT_FI_VERSION, NULL, NULL, 0, hints, &info);
	if (LT_CHECK_RET(ret, 0, "no node: fi_getinfo succeeds")) {
		for (i = info; i; i = i->next)
			ok &= i->ep_attr->type == FI_EP_RDM && (i->caps & FI_MSG);
		LT_CHECK(ok, "no node: every info is FI_EP_RDM with FI_MSG");
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* A capability the tests rely on can be asked for and comes back set. */
static void check_cap(uint64_t cap, const char *name)
{
	struct fi_info *hints = lt_hints(FI_MSG | cap), *info = NULL;
	int ret;

	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "caps FI_MSG|%s: fi_getinfo succeeds", name))
		LT_CHECK((info->caps & cap) == cap, "caps FI_MSG|%s: returned caps include it",
			 name);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/*
 * A threading model asked for comes back as asked, or as FI_THREAD_SAFE (less restrictive, which
 * fi_domain(3) allows). ofi_layer promises the exact model (FI_THREAD_DOMAIN runs lock-free).
 */
static void check_threading(enum fi_threading threading)
{
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL, *i;
	bool ok = true, exact = true;
	char tname[64];
	int ret;

	snprintf(tname, sizeof(tname), "%s", fi_tostr(&threading, FI_TYPE_THREADING));
	hints->domain_attr->threading = threading;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "threading %s: fi_getinfo succeeds", tname)) {
		for (i = info; i; i = i->next) {
			ok &= i->domain_attr->threading == threading ||
			      i->domain_attr->threading == FI_THREAD_SAFE;
			exact &= i->domain_attr->threading == threading;
		}
		LT_CHECK(ok, "threading %s: returned as requested or FI_THREAD_SAFE (got %s)",
			 tname, fi_tostr(&info->domain_attr->threading, FI_TYPE_THREADING));
		if (lt_is_layer())
			LT_CHECK(exact, "threading %s: ofi_layer returns exactly the model asked",
				 tname);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/*
 * A progress model asked for is either provided or refused: a provider may give automatic
 * progress to an application that asked for manual (it still makes its calls), never the
 * reverse.
 */
static void check_progress(enum fi_progress progress)
{
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL, *i;
	char pname[64];
	bool ok = true;
	int ret;

	snprintf(pname, sizeof(pname), "%s", fi_tostr(&progress, FI_TYPE_PROGRESS));
	hints->domain_attr->data_progress = progress;
	ret = lt_getinfo(hints, &info);
	if (progress == FI_PROGRESS_AUTO && ret == -FI_ENODATA) {
		LT_CHECK(!info, "data_progress %s: refused without an info", pname);
		goto out;
	}
	if (LT_CHECK_RET(ret, 0, "data_progress %s: fi_getinfo succeeds", pname)) {
		for (i = info; i; i = i->next) {
			enum fi_progress got = i->domain_attr->data_progress;

			if (progress == FI_PROGRESS_AUTO)
				ok &= got == FI_PROGRESS_AUTO;
			else
				ok &= got == FI_PROGRESS_AUTO || got == FI_PROGRESS_MANUAL;
		}
		LT_CHECK(ok, "data_progress %s: the model returned honours the request (got %s)",
			 pname, fi_tostr(&info->domain_attr->data_progress, FI_TYPE_PROGRESS));
	}
out:
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* Named AVs are offered through FI_SHARED_AV (libfabric's shared-AV test asks for it). */
static void check_shared_av(void)
{
	struct fi_info *hints = lt_hints(FI_MSG | FI_SHARED_AV), *info = NULL;
	int ret;

	ret = lt_getinfo(hints, &info);
	if (lt_is_layer()) {
		LT_CHECK_RET(ret, 0, "FI_SHARED_AV: fi_getinfo succeeds");
		LT_CHECK(!ret && (info->caps & FI_SHARED_AV) &&
			 (info->domain_attr->caps & FI_SHARED_AV),
			 "FI_SHARED_AV: in the info's and the domain's caps");
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* Hints the provider cannot satisfy: -FI_ENODATA, and no info returned. */
static void check_refused(const char *what, struct fi_info *hints)
{
	struct fi_info *info = NULL;
	int ret;

	ret = lt_getinfo(hints, &info);
	LT_CHECK_RET(ret, -FI_ENODATA, "unsatisfiable hints (%s) give -FI_ENODATA", what);
	if (!ret)
		fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void check_unsatisfiable(void)
{
	struct fi_info *hints;

	/* ofi_layer offers no collectives yet (rxm has them, over its util code). */
	if (lt_is_layer())
		check_refused("caps FI_MULTICAST", lt_hints(FI_MSG | FI_MULTICAST));
	else
		lt_note("caps FI_MULTICAST refusal is checked for ofi_layer only");

	hints = lt_hints(FI_MSG);
	hints->ep_attr->type = FI_EP_DGRAM;
	check_refused("ep_type FI_EP_DGRAM", hints);

	hints = lt_hints(FI_MSG);
	hints->tx_attr->inject_size = 64 * GIB;
	check_refused("inject_size 64 GiB", hints);

	hints = lt_hints(FI_MSG);
	hints->tx_attr->iov_limit = 1 << 20;
	check_refused("tx iov_limit 2^20", hints);

	hints = lt_hints(FI_MSG);
	hints->domain_attr->cq_data_size = 64;
	check_refused("cq_data_size 64 bytes", hints);

	/* FI_MR_BASIC (1) and FI_MR_SCALABLE (2) together cannot be honoured by anybody
	 * (values of fi_mr(3): 2.x headers deprecate the names with a warning). */
	hints = lt_hints(FI_MSG);
	hints->domain_attr->mr_mode = 1 | 2;
	check_refused("mr_mode FI_MR_BASIC|FI_MR_SCALABLE", hints);

	hints = lt_hints(FI_MSG);
	hints->addr_format = FI_ADDR_PSMX2;
	check_refused("addr_format FI_ADDR_PSMX2", hints);

	hints = lt_hints(FI_MSG);
	hints->ep_attr->protocol = FI_PROTO_IWARP;
	check_refused("protocol FI_PROTO_IWARP", hints);
}

/* Attributes that hold for the infos the tests use. */
static void check_attributes(void)
{
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL;
	int ret;

	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "default hints: fi_getinfo succeeds")) {
		LT_CHECK(info->domain_attr->cq_data_size >= 4,
			 "cq_data_size >= 4 (fi_senddata is usable) (got %zu)",
			 info->domain_attr->cq_data_size);
		LT_CHECK(!(info->mode & ~(FI_CONTEXT | FI_CONTEXT2)),
			 "no mode bits beyond what the hints allow (mode %#llx)",
			 (unsigned long long) info->mode);
		LT_CHECK(!info->domain_attr->mr_mode,
			 "no mr_mode bits when the hints allow none (mr_mode %#x)",
			 info->domain_attr->mr_mode);
		LT_CHECK(info->domain_attr->threading != FI_THREAD_UNSPEC &&
				 info->domain_attr->data_progress != FI_PROGRESS_UNSPEC &&
				 info->domain_attr->control_progress != FI_PROGRESS_UNSPEC,
			 "threading and progress are concrete values, not UNSPEC");
		LT_CHECK(info->tx_attr->caps & FI_SEND && info->rx_attr->caps & FI_RECV,
			 "tx caps include FI_SEND and rx caps include FI_RECV");
		/* fi_getinfo(3): the attrs' caps are the transmit and receive ones only */
		LT_CHECK(!((info->tx_attr->caps | info->rx_attr->caps) &
			   (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV)),
			 "tx and rx caps hold no domain caps (tx %#llx, rx %#llx)",
			 (unsigned long long) info->tx_attr->caps,
			 (unsigned long long) info->rx_attr->caps);
		LT_CHECK(!(info->tx_attr->caps & (FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV)) &&
				 !(info->rx_attr->caps & FI_SEND),
			 "tx caps hold no receive caps, rx caps no FI_SEND");
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);

	/* FI_INJECT as a default transmit flag, with FI_RM_ENABLED (fabtests' fi_msg_inject) */
	hints = lt_hints(FI_MSG);
	hints->tx_attr->op_flags = FI_INJECT;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info = NULL;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "tx op_flags FI_INJECT, FI_RM_ENABLED: fi_getinfo succeeds"))
		LT_CHECK(info->tx_attr->op_flags & FI_INJECT,
			 "tx op_flags FI_INJECT: kept in the info (%#llx)",
			 (unsigned long long) info->tx_attr->op_flags);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	/* ep_type unspecified: the provider still answers, with RDM. */
	hints = lt_hints(FI_MSG);
	hints->ep_attr->type = FI_EP_UNSPEC;
	info = NULL;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "ep_type FI_EP_UNSPEC: fi_getinfo succeeds"))
		LT_CHECK(info->ep_attr->type == FI_EP_RDM, "ep_type FI_EP_UNSPEC: gives FI_EP_RDM");
	fi_freeinfo(info);
	fi_freeinfo(hints);

	/* The inject size asked for is given, when it is one the provider offers. */
	hints = lt_hints(FI_MSG);
	hints->tx_attr->inject_size = 16;
	info = NULL;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "inject_size 16: fi_getinfo succeeds"))
		LT_CHECK(info->tx_attr->inject_size >= 16, "inject_size 16: at least 16 (got %zu)",
			 info->tx_attr->inject_size);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	/* A copy of an info is usable as hints and gives the provider back. */
	hints = lt_hints(FI_MSG);
	info = NULL;
	ret = lt_getinfo(hints, &info);
	if (ret == 0) {
		struct fi_info *dup = fi_dupinfo(info), *again = NULL;

		if (LT_CHECK(dup != NULL, "fi_dupinfo of a returned info")) {
			ret = lt_getinfo(dup, &again);
			LT_CHECK_RET(ret, 0, "a returned info used as hints gives an info again");
			if (!ret)
				LT_CHECK(!strcmp(again->fabric_attr->prov_name, lt_prov()),
					 "the info from the returned info is the same provider");
			fi_freeinfo(again);
		}
		fi_freeinfo(dup);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* The fi_info tool, with the FI_PROVIDER filter (core first, the spelling it honours). */
static void check_fi_info_tool(void)
{
	char cmd[512], line[512];
	bool listed = false, rdm = false;
	FILE *p;
	int status;

	if (system("command -v fi_info >/dev/null 2>&1") != 0) {
		lt_note("fi_info tool not installed (libfabric-bin): tool check not run");
		return;
	}
#if defined(__SANITIZE_ADDRESS__)
	/* The uninstrumented fi_info cannot load a provider built with AddressSanitizer. */
	lt_note("sanitizer build: fi_info tool check not run");
	return;
#endif
	snprintf(cmd, sizeof(cmd), "FI_PROVIDER='%s' fi_info 2>&1", lt_prov());
	p = popen(cmd, "r");
	if (!LT_CHECK(p != NULL, "run %s", cmd))
		return;
	while (fgets(line, sizeof(line), p)) {
		char want[160];

		snprintf(want, sizeof(want), "provider: %s\n", lt_prov());
		if (strstr(line, want))
			listed = true;
		if (strstr(line, "FI_EP_RDM"))
			rdm = true;
	}
	status = pclose(p);
	LT_CHECK(status == 0, "FI_PROVIDER=\"%s\" fi_info exits 0 (status %d)", lt_prov(), status);
	LT_CHECK(listed, "FI_PROVIDER=\"%s\" fi_info lists \"provider: %s\"", lt_prov(), lt_prov());
	LT_CHECK(rdm, "FI_PROVIDER=\"%s\" fi_info shows FI_EP_RDM", lt_prov());
}

/* A refusal says why in the log: fi_getinfo itself only says -FI_ENODATA. */
static void check_refusal_logged(void)
{
	char cmd[512], line[1024];
	bool has_reason = false;
	FILE *p;

	if (!lt_is_layer() || system("command -v fi_info >/dev/null 2>&1") != 0) {
		lt_note("refusal log check: ofi_layer and the fi_info tool only");
		return;
	}
#if defined(__SANITIZE_ADDRESS__)
	lt_note("sanitizer build: refusal log check not run");
	return;
#endif
	snprintf(cmd, sizeof(cmd), "FI_LOG_LEVEL=info fi_info -p '%s' -c FI_MULTICAST 2>&1",
		 lt_prov());
	p = popen(cmd, "r");
	if (!LT_CHECK(p != NULL, "run %s", cmd))
		return;
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "ofi_layer") && strstr(line, "the hints ask for capabilities"))
			has_reason = true;
	}
	pclose(p);
	LT_CHECK(has_reason, "fi_info -c FI_MULTICAST: the log says which hint is refused");
}

/* fi_domain(3) 1.20 max_ep_auth_key: every key of the AV with FI_AV_AUTH_KEY, else one. */
static void check_max_ep_auth_key(void)
{
#if HAVE_STRUCT_FI_DOMAIN_ATTR_MAX_EP_AUTH_KEY
	struct fi_info *hints = lt_hints(FI_MSG), *info = NULL;

	if (LT_CHECK_RET(lt_getinfo(hints, &info), 0, "infos without keys"))
		LT_CHECK(info->domain_attr->max_ep_auth_key == 1,
			 "max_ep_auth_key 1 without FI_AV_AUTH_KEY (got %zu)",
			 info->domain_attr->max_ep_auth_key);
	fi_freeinfo(info);
	info = NULL;
	hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	if (LT_CHECK_RET(lt_getinfo(hints, &info), 0, "infos with FI_AV_AUTH_KEY"))
		LT_CHECK(info->domain_attr->max_ep_auth_key == UINT32_MAX,
			 "max_ep_auth_key 2^32-1 with FI_AV_AUTH_KEY (got %zu)",
			 info->domain_attr->max_ep_auth_key);
	fi_freeinfo(info);
	fi_freeinfo(hints);
#else
	lt_note("max_ep_auth_key: not in these headers (libfabric < 1.20)");
#endif
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;

	(void) argc;
	lt_begin(argv[0]);

	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	check_name_spelling(lt_prov());
	check_name_spelling(lt_prov_reversed());
	check_no_node();
	check_attributes();
	check_cap(FI_SOURCE, "FI_SOURCE");
	check_cap(FI_MULTI_RECV, "FI_MULTI_RECV");
	check_cap(FI_SEND | FI_RECV, "FI_SEND|FI_RECV");
	check_threading(FI_THREAD_SAFE);
	check_threading(FI_THREAD_DOMAIN);
	check_threading(FI_THREAD_COMPLETION);
	check_threading(FI_THREAD_ENDPOINT);
	check_progress(FI_PROGRESS_MANUAL);
	check_progress(FI_PROGRESS_AUTO);
	check_progress(FI_PROGRESS_UNSPEC);
	check_shared_av();
	check_unsatisfiable();
	check_fi_info_tool();
	check_refusal_logged();
	check_max_ep_auth_key();
	return lt_end();
}
