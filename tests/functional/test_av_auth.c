/*
 * User IDs and authorization keys through the public API (fi_av(3) 1.20, the declarations
 * of <rdma/fi_ext_layer.h> on 1.17 headers): FI_AV_USER_ID per insertion (ids in, fi_addrs
 * out) and as an open flag with fi_av_set_user_id; domains with auth_key_size ==
 * FI_AV_AUTH_KEY; fi_av_insert_auth_key and its size limits; fi_av_lookup_auth_key and its
 * truncation; insertion, removal and user IDs with FI_AUTH_KEY; the 1.20 ops layout and the
 * wrappers' size check. What completions report, and keys held by enabled endpoints, are in
 * test_av_ep.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define HANG_GUARD_S 60

static void make_addr(unsigned v, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(7100);
	sin->sin_addr.s_addr = htonl(0x0a500000u + v);
}

static int open_av(struct lt_dom *dom, enum fi_av_type type, uint64_t flags, struct fid_av **av)
{
	struct fi_av_attr attr = {.type = type, .flags = flags};

	return fi_av_open(dom->domain, &attr, av, NULL);
}

static bool holds(struct fid_av *av, fi_addr_t fi_addr, unsigned v)
{
	struct sockaddr_in want, got;
	size_t len = sizeof(got);

	make_addr(v, &want);
	return !fi_av_lookup(av, fi_addr, &got, &len) && !memcmp(&got, &want, sizeof(got));
}

/* ---- user IDs ---- */

static void test_user_id_insert(struct lt_dom *dom)
{
	struct sockaddr_in a[3];
	fi_addr_t ids[3] = {0xabc0, 0xabc1, 0xabc2};
	struct fid_av *av;
	int ret;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "user id insert: open"))
		return;
	make_addr(0, &a[0]);
	make_addr(1, &a[1]);
	make_addr(2, &a[2]);
	ret = fi_av_insert(av, a, 2, ids, FI_AV_USER_ID, NULL);
	LT_CHECK(ret == 2 && ids[0] == 0 && ids[1] == 1 && holds(av, 0, 0) && holds(av, 1, 1),
		 "user id insert: ids in, fi_addrs out (%d: %lu %lu)", ret, (unsigned long) ids[0],
		 (unsigned long) ids[1]);
	LT_CHECK_RET(fi_av_insert(av, &a[2], 1, NULL, FI_AV_USER_ID, NULL), -FI_EINVAL,
		     "user id insert: no id array refused");
	ids[0] = 0x77;
	ret = fi_av_insertsvc(av, "127.0.0.1", "4000", ids, FI_AV_USER_ID, NULL);
	LT_CHECK(ret == 1 && ids[0] == 2, "user id insertsvc: id in, fi_addr out");
	ids[0] = 0x78;
	ids[1] = 0x79;
	ret = fi_av_insertsym(av, "10.9.0.1", 1, "4000", 2, ids, FI_AV_USER_ID, NULL);
	LT_CHECK(ret == 2 && ids[0] == 3 && ids[1] == 4, "user id insertsym: ids in, out");
	LT_CHECK_RET(fi_av_insert(av, &a[2], 1, ids, FI_AV_USER_ID | FI_AUTH_KEY, NULL),
		     -FI_EINVAL, "user id with FI_AUTH_KEY refused");
	/* fi_av_set_user_id is for AVs opened with FI_AV_USER_ID */
	LT_CHECK_RET(fi_av_set_user_id(av, 0, 5, 0), -FI_EINVAL,
		     "set_user_id on an av opened without FI_AV_USER_ID refused");
	LT_CHECK_RET(fi_close(&av->fid), 0, "user id insert: close");
}

static void test_user_id_attr(struct lt_dom *dom, enum fi_av_type type, const char *tag)
{
	struct sockaddr_in a[2];
	fi_addr_t fi_addr[2], ids[1] = {9};
	struct fid_av *av;
	int ret;

	if (!LT_CHECK_RET(open_av(dom, type, FI_AV_USER_ID, &av), 0, "%s: open", tag))
		return;
	make_addr(0, &a[0]);
	make_addr(1, &a[1]);
	/* fi_av(3) 1.20: the per-insertion flag is not for these AVs */
	LT_CHECK_RET(fi_av_insert(av, a, 1, ids, FI_AV_USER_ID, NULL), -FI_EINVAL,
		     "%s: FI_AV_USER_ID per insertion refused", tag);
	ret = fi_av_insert(av, a, 2, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 2, "%s: insert 2", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, fi_addr[0], 0x1000, 0), 0, "%s: set_user_id", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, fi_addr[0], 0x1001, 0), 0, "%s: set_user_id again",
		     tag);
	LT_CHECK_RET(fi_av_set_user_id(av, fi_addr[1], 0x2000, FI_MORE), -FI_EINVAL,
		     "%s: set_user_id with unknown flags refused", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, 1000, 1, 0), -FI_EINVAL,
		     "%s: set_user_id of a never inserted fi_addr refused", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, FI_ADDR_NOTAVAIL, 1, 0), -FI_EINVAL,
		     "%s: set_user_id of FI_ADDR_NOTAVAIL refused", tag);
	LT_CHECK_RET(fi_av_remove(av, &fi_addr[1], 1, 0), 0, "%s: remove", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, fi_addr[1], 1, 0), -FI_EINVAL,
		     "%s: set_user_id of a removed fi_addr refused", tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: close", tag);
}

/* ---- authorization keys ---- */

static void test_keys(struct lt_dom *dom, enum fi_av_type type, const char *tag)
{
	const char key8[8] = "jobkey01", key32[32] = "0123456789abcdef0123456789abcdef";
	char big[64], buf[64];
	struct sockaddr_in a[3];
	fi_addr_t k1, k2, kk, fi_addr[3], in[3];
	struct fid_av *av;
	int err[3], ret;
	size_t size;

	if (!LT_CHECK_RET(open_av(dom, type, FI_AV_USER_ID, &av), 0, "%s: open", tag))
		return;
	memset(big, 'k', sizeof(big));

	/* sizes: 1 to FI_LAYER_AUTH_KEY_MAX_SIZE */
	LT_CHECK_RET(fi_av_insert_auth_key(av, key8, 0, &k1, 0), -FI_EINVAL,
		     "%s: size 0 refused", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, big, FI_LAYER_AUTH_KEY_MAX_SIZE + 1, &k1, 0),
		     -FI_EINVAL, "%s: size %d refused", tag, FI_LAYER_AUTH_KEY_MAX_SIZE + 1);
	LT_CHECK_RET(fi_av_insert_auth_key(av, NULL, 8, &k1, 0), -FI_EINVAL,
		     "%s: NULL key refused", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, key8, 8, NULL, 0), -FI_EINVAL,
		     "%s: NULL fi_addr refused", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, key8, 8, &k1, FI_MORE), -FI_EINVAL,
		     "%s: flags refused", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, key8, 8, &k1, 0), 0, "%s: 8-byte key", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, key32, 32, &k2, 0), 0, "%s: 32-byte key", tag);
	LT_CHECK_RET(fi_av_insert_auth_key(av, "x", 1, &kk, 0), 0, "%s: 1-byte key", tag);
	LT_CHECK(k1 != k2 && k2 != kk && k1 != kk, "%s: distinct handles", tag);

	/* lookup: exact, truncated, size query, errors */
	size = sizeof(buf);
	memset(buf, 0, sizeof(buf));
	ret = fi_av_lookup_auth_key(av, k2, buf, &size);
	LT_CHECK(ret == 0 && size == 32 && !memcmp(buf, key32, 32), "%s: lookup 32 bytes", tag);
	size = 3;
	memset(buf, '.', sizeof(buf));
	ret = fi_av_lookup_auth_key(av, k1, buf, &size);
	LT_CHECK(ret == 0 && size == 8 && !memcmp(buf, key8, 3) && buf[3] == '.',
		 "%s: lookup truncated to 3 bytes, full size back", tag);
	size = 0;
	ret = fi_av_lookup_auth_key(av, kk, NULL, &size);
	LT_CHECK(ret == 0 && size == 1, "%s: lookup size query", tag);
	LT_CHECK_RET(fi_av_lookup_auth_key(av, k1, buf, NULL), -FI_EINVAL,
		     "%s: lookup without a size refused", tag);
	size = sizeof(buf);
	LT_CHECK_RET(fi_av_lookup_auth_key(av, 12345, buf, &size), -FI_EINVAL,
		     "%s: lookup of an unknown fi_addr refused", tag);
	size = sizeof(buf);
	LT_CHECK_RET(fi_av_lookup_auth_key(av, k1 ^ (1ULL << 40), buf, &size), -FI_EINVAL,
		     "%s: lookup of a forged key handle refused", tag);

	/* addresses with keys: handles in, fi_addrs out; a bad handle fails that address */
	make_addr(0, &a[0]);
	make_addr(1, &a[1]);
	make_addr(0, &a[2]);
	in[0] = k1;
	in[1] = 424242;
	in[2] = k2;
	ret = fi_av_insert(av, a, 3, in, FI_AUTH_KEY | FI_SYNC_ERR, err);
	LT_CHECK(ret == 2 && err[0] == 0 && err[1] == FI_EINVAL && err[2] == 0 &&
			 in[1] == FI_ADDR_NOTAVAIL,
		 "%s: FI_AUTH_KEY insert, a bad handle fails its address (%d, %d)", tag, ret,
		 err[1]);
	fi_addr[0] = in[0];
	fi_addr[2] = in[2];
	LT_CHECK(fi_addr[0] != fi_addr[2] && holds(av, fi_addr[0], 0) && holds(av, fi_addr[2], 0),
		 "%s: one address under two keys is two entries", tag);
	LT_CHECK_RET(fi_av_insert(av, a, 1, NULL, FI_AUTH_KEY, NULL), -FI_EINVAL,
		     "%s: FI_AUTH_KEY without handles refused", tag);
	size = sizeof(buf);
	ret = fi_av_lookup_auth_key(av, fi_addr[2], buf, &size);
	LT_CHECK(ret == 0 && size == 32 && !memcmp(buf, key32, 32),
		 "%s: lookup_auth_key of an address gives its key", tag);
	ret = fi_av_insert(av, &a[1], 1, &fi_addr[1], 0, NULL);
	size = sizeof(buf);
	LT_CHECK(ret == 1 && fi_av_lookup_auth_key(av, fi_addr[1], buf, &size) == 0 && size == 0,
		 "%s: an address without a key has an empty key", tag);

	/* user IDs of keys */
	LT_CHECK_RET(fi_av_set_user_id(av, k1, 0x5000, FI_AUTH_KEY), 0,
		     "%s: set_user_id of a key handle", tag);
	LT_CHECK_RET(fi_av_set_user_id(av, fi_addr[1], 0x5001, FI_AUTH_KEY), -FI_EINVAL,
		     "%s: set_user_id(FI_AUTH_KEY) of an address refused", tag);

	/* removal: only with FI_AUTH_KEY, only when no address uses the key */
	LT_CHECK_RET(fi_av_remove(av, &k1, 1, 0), -FI_EINVAL,
		     "%s: key handle removed without FI_AUTH_KEY refused", tag);
	LT_CHECK_RET(fi_av_remove(av, &fi_addr[1], 1, FI_AUTH_KEY), -FI_EINVAL,
		     "%s: address removed with FI_AUTH_KEY refused", tag);
	LT_CHECK_RET(fi_av_remove(av, &k1, 1, FI_AUTH_KEY), -FI_EBUSY,
		     "%s: key used by an address: busy", tag);
	LT_CHECK_RET(fi_av_remove(av, &fi_addr[0], 1, 0), 0, "%s: its address removed", tag);
	LT_CHECK_RET(fi_av_remove(av, &k1, 1, FI_AUTH_KEY), 0, "%s: then the key", tag);
	LT_CHECK_RET(fi_av_remove(av, &k1, 1, FI_AUTH_KEY), -FI_EINVAL,
		     "%s: the key twice refused", tag);
	size = sizeof(buf);
	LT_CHECK_RET(fi_av_lookup_auth_key(av, k1, buf, &size), -FI_EINVAL,
		     "%s: removed key not found", tag);
	in[0] = kk;
	in[1] = kk;
	LT_CHECK_RET(fi_av_remove(av, in, 2, FI_AUTH_KEY), -FI_EINVAL,
		     "%s: a key listed twice refused", tag);
	LT_CHECK_RET(fi_av_remove(av, &kk, 1, FI_AUTH_KEY), 0, "%s: kept by the failed call",
		     tag);
	/* a new key does not revive the old handle */
	LT_CHECK_RET(fi_av_insert_auth_key(av, key8, 8, &kk, 0), 0, "%s: key reinserted", tag);
	size = sizeof(buf);
	LT_CHECK(fi_av_lookup_auth_key(av, k1, buf, &size) == -FI_EINVAL && kk != k1,
		 "%s: stale handle stays refused", tag);
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: close with keys and keyed entries", tag);
}

/* A per-insertion user ID once keys are in use, keys on a named AV. */
static void test_key_rules(struct lt_dom *dom)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	struct sockaddr_in a;
	fi_addr_t k, fi_addr;
	struct fid_av *av;
	char name[64];
	int ret;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "key rules: open"))
		return;
	make_addr(3, &a);
	LT_CHECK_RET(fi_av_insert_auth_key(av, "abc", 3, &k, 0), 0, "key rules: key");
	fi_addr = k;
	LT_CHECK_RET(fi_av_insert(av, &a, 1, &fi_addr, FI_AUTH_KEY, NULL), 1,
		     "key rules: keyed address");
	fi_addr = 5;
	/* fi_av(3) 1.20: FI_AV_USER_ID per insertion is invalid with FI_AV_AUTH_KEY */
	LT_CHECK_RET(fi_av_insert(av, &a, 1, &fi_addr, FI_AV_USER_ID, NULL), -FI_EINVAL,
		     "key rules: FI_AV_USER_ID per insertion refused with keys");
	fi_close(&av->fid);

	snprintf(name, sizeof(name), "ofi_layer_test_keys.%d", (int) getpid());
	attr.name = name;
	ret = fi_av_open(dom->domain, &attr, &av, NULL);
	if (LT_CHECK_RET(ret, 0, "key rules: named av")) {
		ret = fi_av_insert_auth_key(av, "abc", 3, &k, 0);
		if (lt_is_layer())
			LT_CHECK_RET(ret, -FI_EOPNOTSUPP, "key rules: no keys on a named av");
		fi_close(&av->fid);
	}
}

/* ---- the 1.20 interface ---- */

static int fake_insert_auth_key(struct fid_av *av, const void *key, size_t size,
				fi_addr_t *fi_addr, uint64_t flags)
{
	return 4242;
}

static void test_layout(struct lt_dom *dom)
{
	struct fi_layer_ops_av short_ops = {.size = offsetof(struct fi_layer_ops_av,
							     insert_auth_key)};
	struct fi_layer_ops_av full_ops = {.size = sizeof(struct fi_layer_ops_av),
					   .insert_auth_key = fake_insert_auth_key};
	struct fid_av fake = {.ops = (struct fi_ops_av *) &short_ops};
	fi_addr_t k;
	size_t size = 0;
	struct fid_av *av;

	/* upstream's layout: the three entries follow av_set, pointer-sized */
	LT_CHECK(offsetof(struct fi_layer_ops_av, av_set) == offsetof(struct fi_ops_av, av_set) &&
			 offsetof(struct fi_layer_ops_av, insert_auth_key) ==
				 offsetof(struct fi_ops_av, av_set) + sizeof(void *) &&
			 offsetof(struct fi_layer_ops_av, set_user_id) ==
				 offsetof(struct fi_ops_av, av_set) + 3 * sizeof(void *),
		 "layout: insert_auth_key, lookup_auth_key, set_user_id after av_set");
	LT_CHECK_RET(fi_av_insert_auth_key(&fake, "a", 1, &k, 0), -FI_ENOSYS,
		     "layout: a 1.17-sized table gives -FI_ENOSYS (insert_auth_key)");
	LT_CHECK_RET(fi_av_lookup_auth_key(&fake, 0, NULL, &size), -FI_ENOSYS,
		     "layout: a 1.17-sized table gives -FI_ENOSYS (lookup_auth_key)");
	LT_CHECK_RET(fi_av_set_user_id(&fake, 0, 0, 0), -FI_ENOSYS,
		     "layout: a 1.17-sized table gives -FI_ENOSYS (set_user_id)");
	fake.ops = (struct fi_ops_av *) &full_ops;
	LT_CHECK_RET(fi_av_insert_auth_key(&fake, "a", 1, &k, 0), 4242,
		     "layout: a long enough table is called");
	LT_CHECK_RET(fi_av_set_user_id(&fake, 0, 0, 0), -FI_ENOSYS,
		     "layout: a NULL entry gives -FI_ENOSYS");

	if (LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "layout: open")) {
		LT_CHECK(av->ops->size >= sizeof(struct fi_layer_ops_av),
			 "layout: the provider's table has the 1.20 entries (size %zu)",
			 av->ops->size);
		fi_close(&av->fid);
	}
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info, *plain_info;
	struct lt_dom dom;
	int ret;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);

	/* without FI_AV_AUTH_KEY: user IDs only, auth_key_size 0 reported */
	hints = lt_hints(FI_MSG);
	plain_info = lt_getinfo_or_skip(hints);
	LT_CHECK(plain_info->domain_attr->auth_key_size == 0,
		 "getinfo: auth_key_size 0 by default");
	if (LT_CHECK_RET(lt_dom_open(plain_info, &dom), 0, "plain domain")) {
		test_user_id_insert(&dom);
		test_user_id_attr(&dom, FI_AV_TABLE, "user id attr table");
		test_user_id_attr(&dom, FI_AV_MAP, "user id attr map");
		test_layout(&dom);
		lt_dom_close(&dom);
	}

	/* with FI_AV_AUTH_KEY: keys */
	hints->domain_attr->auth_key_size = FI_AV_AUTH_KEY;
	ret = lt_getinfo(hints, &info);
	if (LT_CHECK_RET(ret, 0, "getinfo with auth_key_size FI_AV_AUTH_KEY")) {
		LT_CHECK(info->domain_attr->auth_key_size == FI_AV_AUTH_KEY,
			 "getinfo: FI_AV_AUTH_KEY reported back");
		if (LT_CHECK_RET(lt_dom_open(info, &dom), 0, "auth-key domain")) {
			test_keys(&dom, FI_AV_TABLE, "keys table");
			test_keys(&dom, FI_AV_MAP, "keys map");
			test_key_rules(&dom);
			lt_dom_close(&dom);
		}
		fi_freeinfo(info);
	}
	fi_freeinfo(plain_info);
	fi_freeinfo(hints);
	return lt_end();
}
