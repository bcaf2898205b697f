/*
 * fi_av(3) 1.20 as an application built against libfabric 1.20 or later sees it: this file
 * includes libfabric's headers only (never <rdma/fi_ext_layer.h>), so fi_av_insert_auth_key,
 * fi_av_lookup_auth_key, fi_av_set_user_id, FI_AUTH_KEY and FI_AV_AUTH_KEY are libfabric's
 * own inline calls and values, reaching ofi_layer through struct fi_ops_av. Built only
 * against such headers (configure's HAVE_NATIVE_AV_AUTH_KEY); test_av_auth and test_auth_data
 * cover the same calls in depth, through the project's header where libfabric lacks them.
 * Two endpoints of one FI_AV_AUTH_KEY domain: keys in before enable, addresses in with their
 * key, a user ID set on the receiver's entry; a message travels under the key and its
 * completion names the sender by that user ID; the calls' bad arguments are refused.
 */
#include "common.h"

#include <string.h>

#ifdef FI_EXT_LAYER_H
#error "test_av_native must see libfabric's own declarations only"
#endif

#define KEY "native-key"
#define USER_ID 0x5eedULL

struct native {
	struct lt_dom dom;
	struct lt_ep r, s;     /* receiver (AV with FI_AV_USER_ID), sender */
	fi_addr_t r_key, s_key; /* each AV's handle of KEY */
	fi_addr_t r_s, s_r;     /* each one's entry for the other, inserted with the key */
};

static void native_close(struct native *t)
{
	lt_ep_close(&t->s);
	lt_ep_close(&t->r);
	lt_dom_close(&t->dom);
	fi_freeinfo(t->dom.info);
}

/* An address inserted with the key handle key: its fi_addr, or FI_ADDR_NOTAVAIL. */
static fi_addr_t insert_keyed(struct lt_ep *ep, const void *addr, fi_addr_t key)
{
	fi_addr_t fi_addr = key;

	return fi_av_insert(ep->av, addr, 1, &fi_addr, FI_AUTH_KEY, NULL) == 1 ? fi_addr
									       : FI_ADDR_NOTAVAIL;
}

static bool native_open(struct native *t)
{
	const struct lt_ep_opts r_opts = {.no_enable = true, .av_flags = FI_AV_USER_ID};
	const struct lt_ep_opts s_opts = {.no_enable = true};
	struct fi_info *hints = lt_hints(FI_MSG | FI_SOURCE);

	memset(t, 0, sizeof(*t));
	hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	t->dom.info = lt_getinfo_or_skip(hints);
	fi_freeinfo(hints);
	if (!LT_CHECK_RET(lt_dom_open(t->dom.info, &t->dom), 0, "domain with FI_AV_AUTH_KEY"))
		return false;
	if (!LT_CHECK_RET(lt_ep_open(&t->dom, &r_opts, &t->r), 0, "receiver opened") ||
	    !LT_CHECK_RET(lt_ep_open(&t->dom, &s_opts, &t->s), 0, "sender opened"))
		return false;
	/* an endpoint is enabled with the keys its AV holds at the time */
	if (!LT_CHECK_RET(fi_av_insert_auth_key(t->r.av, KEY, strlen(KEY), &t->r_key, 0), 0,
			  "fi_av_insert_auth_key: receiver's key") ||
	    !LT_CHECK_RET(fi_av_insert_auth_key(t->s.av, KEY, strlen(KEY), &t->s_key, 0), 0,
			  "fi_av_insert_auth_key: sender's key") ||
	    !LT_CHECK_RET(lt_ep_enable(&t->r), 0, "receiver enabled") ||
	    !LT_CHECK_RET(lt_ep_enable(&t->s), 0, "sender enabled"))
		return false;
	t->r_s = insert_keyed(&t->r, t->s.addr, t->r_key);
	t->s_r = insert_keyed(&t->s, t->r.addr, t->s_key);
	return LT_CHECK(t->r_s != FI_ADDR_NOTAVAIL && t->s_r != FI_ADDR_NOTAVAIL,
			"fi_av_insert with FI_AUTH_KEY: each endpoint's address under the key");
}

static void test_lookup(struct native *t)
{
	char buf[64];
	size_t size = sizeof(buf);

	memset(buf, 0, sizeof(buf));
	LT_CHECK(fi_av_lookup_auth_key(t->r.av, t->r_key, buf, &size) == 0 &&
			 size == strlen(KEY) && !memcmp(buf, KEY, size),
		 "fi_av_lookup_auth_key: the key of its handle");
	size = 3;
	memset(buf, '.', sizeof(buf));
	LT_CHECK(fi_av_lookup_auth_key(t->r.av, t->r_key, buf, &size) == 0 &&
			 size == strlen(KEY) && !memcmp(buf, KEY, 3) && buf[3] == '.',
		 "fi_av_lookup_auth_key: truncated to the room given, full size back");
	size = sizeof(buf);
	LT_CHECK(fi_av_lookup_auth_key(t->r.av, t->r_s, buf, &size) == 0 &&
			 size == strlen(KEY) && !memcmp(buf, KEY, size),
		 "fi_av_lookup_auth_key: an address inserted with the key gives it");
}

static void test_user_id_data(struct native *t)
{
	char out[] = "under the key", in[sizeof(out)];
	struct lt_comp comp;
	int ctx_tx, ctx_rx;

	if (!LT_CHECK_RET(fi_av_set_user_id(t->r.av, t->r_s, USER_ID, 0), 0,
			  "fi_av_set_user_id on the receiver's entry for the sender"))
		return;
	memset(in, 0, sizeof(in));
	if (!LT_CHECK_RET(lt_recv(&t->r, in, sizeof(in), FI_ADDR_UNSPEC, &ctx_rx), 0,
			  "receive posted") ||
	    !LT_CHECK_RET(lt_send(&t->s, out, sizeof(out), t->s_r, &ctx_tx), 0, "send posted"))
		return;
	LT_CHECK(lt_cq_next(&t->s.tx, &comp, LT_TIMEOUT_MS) && !comp.err &&
			 comp.op_context == &ctx_tx,
		 "the send under the key completes");
	if (!LT_CHECK(lt_cq_next(&t->r.rx, &comp, LT_TIMEOUT_MS) && !comp.err,
		      "the message under the key arrives"))
		return;
	LT_CHECK(comp.len == sizeof(out) && !memcmp(in, out, sizeof(out)), "its data is whole");
	LT_CHECK(comp.src == USER_ID, "its source is the user ID set (%#llx)",
		 (unsigned long long) comp.src);
}

static void test_bad_arguments(struct native *t)
{
	char key33[33], buf[8];
	size_t size = sizeof(buf);
	fi_addr_t handle;

	memset(key33, 'k', sizeof(key33));
	LT_CHECK_RET(fi_av_insert_auth_key(t->r.av, KEY, 0, &handle, 0), -FI_EINVAL,
		     "fi_av_insert_auth_key: an empty key refused");
	LT_CHECK_RET(fi_av_insert_auth_key(t->r.av, key33, sizeof(key33), &handle, 0),
		     -FI_EINVAL, "fi_av_insert_auth_key: 33 bytes refused");
	LT_CHECK_RET(fi_av_insert_auth_key(t->r.av, NULL, 4, &handle, 0), -FI_EINVAL,
		     "fi_av_insert_auth_key: no key refused");
	LT_CHECK_RET(fi_av_insert_auth_key(t->r.av, KEY, strlen(KEY), &handle, FI_MORE),
		     -FI_EINVAL, "fi_av_insert_auth_key: flags refused");
	LT_CHECK_RET(fi_av_lookup_auth_key(t->r.av, 12345, buf, &size), -FI_EINVAL,
		     "fi_av_lookup_auth_key: an unknown fi_addr refused");
	LT_CHECK_RET(fi_av_set_user_id(t->s.av, t->s_r, USER_ID, 0), -FI_EINVAL,
		     "fi_av_set_user_id: refused on an AV opened without FI_AV_USER_ID");
	LT_CHECK_RET(fi_av_set_user_id(t->r.av, 12345, USER_ID, 0), -FI_EINVAL,
		     "fi_av_set_user_id: an unknown fi_addr refused");
}

int main(int argc, char **argv)
{
	struct native t;

	lt_begin("test_av_native");
	if (native_open(&t)) {
		test_lookup(&t);
		test_user_id_data(&t);
		test_bad_arguments(&t);
	}
	native_close(&t);
	return lt_end();
}
