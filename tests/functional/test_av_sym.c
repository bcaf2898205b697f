/*
 * Insertion by name and by range, and what an fi_addr may be, through the public API
 * (fi_av(3)): fi_av_insertsvc with node/service and FI_ADDR_STR nodes; fi_av_insertsym over
 * IPv4 and IPv6 ranges and numbered host names, node-major, nodecnt x svccnt, with its
 * refusals; fi_av_straddr for both families; FI_AV_MAP handles that carry a generation
 * (stale, removed and forged values refused); ofi_layer's reverse lookup extension;
 * rx_ctx_bits and fi_rx_addr.
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/fi_ext_layer.h>

#define HANG_GUARD_S 60

static int open_av(struct lt_dom *dom, enum fi_av_type type, int rx_ctx_bits,
		   struct fid_av **av)
{
	struct fi_av_attr attr = {.type = type, .rx_ctx_bits = rx_ctx_bits};

	return fi_av_open(dom->domain, &attr, av, NULL);
}

/* The IPv4 address and port stored at fi_addr, as "a.b.c.d:port". */
static const char *stored(struct fid_av *av, fi_addr_t fi_addr, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	char host[INET6_ADDRSTRLEN];
	size_t size = sizeof(ss);

	if (fi_av_lookup(av, fi_addr, &ss, &size)) {
		snprintf(buf, len, "(not found)");
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *) &ss;

		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s->sin6_port));
	} else {
		struct sockaddr_in *s = (struct sockaddr_in *) &ss;

		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s->sin_port));
	}
	return buf;
}

static bool stored_is(struct fid_av *av, fi_addr_t fi_addr, const char *want)
{
	char buf[80];

	return !strcmp(stored(av, fi_addr, buf, sizeof(buf)), want);
}

/* ---- insertsvc ---- */

static void test_insertsvc(struct lt_dom *dom)
{
	fi_addr_t fi_addr[2];
	struct sockaddr_in sin;
	struct fid_av *av;
	char str[64], buf[80];
	size_t len;
	int err, ret;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "svc: open"))
		return;
	ret = fi_av_insertsvc(av, "fi_sockaddr_in://127.0.0.1:4321", NULL, fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "127.0.0.1:4321"),
		 "svc: FI_ADDR_STR node (%d, %s)", ret, stored(av, fi_addr[0], buf, sizeof(buf)));
	ret = fi_av_insertsvc(av, "fi_sockaddr://10.7.7.7:77", NULL, fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "10.7.7.7:77"),
		 "svc: fi_sockaddr:// node");
	LT_CHECK_RET(fi_av_insertsvc(av, "fi_sockaddr_in://127.0.0.1:4321", "4000", fi_addr, 0,
				     NULL), -FI_EINVAL,
		     "svc: FI_ADDR_STR node with a service refused");
	err = 0;
	ret = fi_av_insertsvc(av, "fi_sockaddr_in://300.1.1.1:1", NULL, fi_addr, FI_SYNC_ERR,
			      &err);
	LT_CHECK(ret == 0 && err > 0 && fi_addr[0] == FI_ADDR_NOTAVAIL,
		 "svc: malformed FI_ADDR_STR is a failed insertion (err %d)", err);
	err = 0;
	ret = fi_av_insertsvc(av, "fi_sockaddr_in6://[::1]:5", NULL, fi_addr, FI_SYNC_ERR, &err);
	LT_CHECK(ret == 0 && err > 0, "svc: FI_ADDR_STR of the other family fails (err %d)", err);

	/* no node: the local (loopback) address, as getaddrinfo gives it */
	ret = fi_av_insertsvc(av, NULL, "4555", fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "127.0.0.1:4555"),
		 "svc: no node is the loopback address (%s)",
		 stored(av, fi_addr[0], buf, sizeof(buf)));
	ret = fi_av_insertsvc(av, "localhost", "4556", fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "127.0.0.1:4556"), "svc: host name");

	/* straddr's string inserts the same address back */
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(6123);
	sin.sin_addr.s_addr = htonl(0x0a0b0c0d);
	len = sizeof(str);
	if (LT_CHECK(fi_av_straddr(av, &sin, str, &len) == str, "svc: straddr")) {
		ret = fi_av_insertsvc(av, str, NULL, fi_addr, 0, NULL);
		LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "10.11.12.13:6123"),
			 "svc: straddr's string goes back in (%s)", str);
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "svc: close");
}

/* ---- insertsym ---- */

static void test_insertsym_v4(struct lt_dom *dom)
{
	static const char *const want[] = {
		"10.1.1.1:5000", "10.1.1.1:5001", "10.1.1.2:5000", "10.1.1.2:5001",
	};
	fi_addr_t fi_addr[16];
	struct fid_av *av;
	int err[16], ret, i;
	char buf[80];
	bool ok;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "sym: open"))
		return;
	ret = fi_av_insertsym(av, "10.1.1.1", 2, "5000", 2, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 4, "sym: 2 nodes x 2 services");
	for (i = 0; i < 4 && ret == 4; i++)
		LT_CHECK(fi_addr[i] == (fi_addr_t) i && stored_is(av, fi_addr[i], want[i]),
			 "sym: entry %d is %s (got %s)", i, want[i],
			 stored(av, fi_addr[i], buf, sizeof(buf)));

	ret = fi_av_insertsym(av, "10.1.1.255", 3, "6000", 4, fi_addr, 0, NULL);
	ok = ret == 12 && stored_is(av, fi_addr[0], "10.1.1.255:6000") &&
	     stored_is(av, fi_addr[3], "10.1.1.255:6003") &&
	     stored_is(av, fi_addr[4], "10.1.2.0:6000") &&
	     stored_is(av, fi_addr[11], "10.1.2.1:6003");
	LT_CHECK(ok, "sym: 3 x 4 across an octet, node-major (%d)", ret);

	ret = fi_av_insertsym(av, "localhost", 1, "7000", 3, fi_addr, 0, NULL);
	LT_CHECK(ret == 3 && stored_is(av, fi_addr[2], "127.0.0.1:7002"),
		 "sym: one host name, three ports");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 0, "5000", 2, fi_addr, 0, NULL), 0,
		     "sym: nodecnt 0 inserts nothing");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 2, "5000", 0, fi_addr, 0, NULL), 0,
		     "sym: svccnt 0 inserts nothing");

	/* numbered host names: each is resolved; these do not resolve, so all four fail */
	for (i = 0; i < 4; i++)
		err[i] = -1;
	ret = fi_av_insertsym(av, "ofilayer-nosuch-host9", 2, "5000", 2, fi_addr, FI_SYNC_ERR,
			      err);
	LT_CHECK(ret == 0 && err[0] > 0 && err[1] > 0 && err[2] > 0 && err[3] > 0 &&
			 fi_addr[3] == FI_ADDR_NOTAVAIL,
		 "sym: numbered host names resolved one by one (%d, %d %d %d %d)", ret, err[0],
		 err[1], err[2], err[3]);

	/* refusals: the whole call */
	LT_CHECK_RET(fi_av_insertsym(av, "localhost", 2, "5000", 1, fi_addr, 0, NULL),
		     -FI_EINVAL, "sym: a host name without a numeric suffix, nodecnt 2");
	LT_CHECK_RET(fi_av_insertsym(av, "255.255.255.255", 2, "5000", 1, fi_addr, 0, NULL),
		     -FI_EINVAL, "sym: past 255.255.255.255");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 1, "65535", 2, fi_addr, 0, NULL),
		     -FI_EINVAL, "sym: past port 65535");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 1, "http", 2, fi_addr, 0, NULL),
		     -FI_EINVAL, "sym: a service range must be numeric");
	LT_CHECK_RET(fi_av_insertsym(av, NULL, 1, "5000", 1, fi_addr, 0, NULL), -FI_EINVAL,
		     "sym: no node");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 1, NULL, 1, fi_addr, 0, NULL), -FI_EINVAL,
		     "sym: no service");
	LT_CHECK_RET(fi_av_insertsym(av, "10.1.1.1", 1, "5000", 1, fi_addr, 1ULL << 61, NULL),
		     -FI_EINVAL, "sym: unknown flag");

	/* an IPv6 range in an IPv4 AV: every address fails */
	err[0] = err[1] = -1;
	ret = fi_av_insertsym(av, "fd00::1", 2, "5000", 1, fi_addr, FI_SYNC_ERR, err);
	LT_CHECK(ret == 0 && err[0] > 0 && err[1] > 0, "sym: IPv6 nodes in an IPv4 av fail");
	LT_CHECK_RET(fi_close(&av->fid), 0, "sym: close");
}

static void test_insertsym_v6(struct lt_dom *dom)
{
	fi_addr_t fi_addr[8];
	struct fid_av *av;
	char buf[80];
	int ret;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_MAP, 0, &av), 0, "sym6: open"))
		return;
	ret = fi_av_insertsym(av, "fd00::1", 2, "5000", 2, fi_addr, 0, NULL);
	LT_CHECK(ret == 4 && stored_is(av, fi_addr[0], "[fd00::1]:5000") &&
			 stored_is(av, fi_addr[1], "[fd00::1]:5001") &&
			 stored_is(av, fi_addr[2], "[fd00::2]:5000") &&
			 stored_is(av, fi_addr[3], "[fd00::2]:5001"),
		 "sym6: 2 x 2, node-major (%d, %s)", ret, stored(av, fi_addr[0], buf, sizeof(buf)));
	ret = fi_av_insertsym(av, "fd00::ffff", 2, "5000", 1, fi_addr, 0, NULL);
	LT_CHECK(ret == 2 && stored_is(av, fi_addr[1], "[fd00::1:0]:5000"),
		 "sym6: carries into the next 16 bits (%s)",
		 stored(av, fi_addr[1], buf, sizeof(buf)));
	LT_CHECK_RET(fi_av_insertsym(av, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 2, "5000", 1,
				     fi_addr, 0, NULL), -FI_EINVAL, "sym6: past the last address");
	ret = fi_av_insertsvc(av, "fi_sockaddr_in6://[fd00::9]:99", NULL, fi_addr, 0, NULL);
	LT_CHECK(ret == 1 && stored_is(av, fi_addr[0], "[fd00::9]:99"), "sym6: FI_ADDR_STR");
	LT_CHECK_RET(fi_close(&av->fid), 0, "sym6: close");
}

/* ---- FI_AV_MAP handles ---- */

static void test_map_handles(struct lt_dom *dom)
{
	struct sockaddr_in a[2], got;
	fi_addr_t h[2], again, other, list[1];
	struct fid_av *av, *av2;
	size_t len;
	bool ok = true;
	int i;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_MAP, 0, &av), 0, "map: open") ||
	    !LT_CHECK_RET(open_av(dom, FI_AV_MAP, 0, &av2), 0, "map: second av"))
		return;
	for (i = 0; i < 2; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].sin_family = AF_INET;
		a[i].sin_port = htons(8000);
		a[i].sin_addr.s_addr = htonl(0x0a0c0000u + (uint32_t) i);
	}
	LT_CHECK_RET(fi_av_insert(av, a, 2, h, 0, NULL), 2, "map: insert 2");
	LT_CHECK_RET(fi_av_insert(av2, a, 1, &other, 0, NULL), 1, "map: insert in the other av");
	if (lt_is_layer())
		LT_CHECK(!(h[0] >> 56) && !(h[1] >> 56), "map: top byte of handles clear");

	/* removed, then the slot reused: the old handle stays refused */
	LT_CHECK_RET(fi_av_remove(av, &h[0], 1, 0), 0, "map: remove");
	LT_CHECK_RET(fi_av_insert(av, &a[0], 1, &again, 0, NULL), 1, "map: reinsert");
	LT_CHECK(again != h[0], "map: a new handle for the reused slot");
	len = sizeof(got);
	LT_CHECK_RET(fi_av_lookup(av, h[0], &got, &len), -FI_EINVAL, "map: stale handle: lookup");
	list[0] = h[0];
	LT_CHECK_RET(fi_av_remove(av, list, 1, 0), -FI_EINVAL, "map: stale handle: remove");
	len = sizeof(got);
	LT_CHECK(fi_av_lookup(av, again, &got, &len) == 0 && !memcmp(&got, &a[0], sizeof(got)),
		 "map: new handle works");

	if (lt_is_layer()) {
		/* forged: neighbours, flipped bits, small integers, another AV's handle */
		len = sizeof(got);
		ok = fi_av_lookup(av, h[1] ^ (1ULL << 33), &got, &len) == -FI_EINVAL;
		len = sizeof(got);
		ok = ok && fi_av_lookup(av, h[1] | (1ULL << 60), &got, &len) == -FI_EINVAL;
		for (i = 0; i < 16; i++) {
			len = sizeof(got);
			ok = ok && ((fi_addr_t) i == h[1] || (fi_addr_t) i == again ||
				    fi_av_lookup(av, (fi_addr_t) i, &got, &len) == -FI_EINVAL);
		}
		LT_CHECK(ok, "map: forged values refused");
		len = sizeof(got);
		LT_CHECK(other == h[1] || other == again ||
				 fi_av_lookup(av, other, &got, &len) == -FI_EINVAL,
			 "map: another av's handle refused");
	}
	fi_close(&av2->fid);
	LT_CHECK_RET(fi_close(&av->fid), 0, "map: close");
}

/* ---- straddr ---- */

static void test_straddr(struct lt_dom *dom, bool v6)
{
	const char *want = v6 ? "fi_sockaddr_in6://[::1]:4000" : "fi_sockaddr_in://127.0.0.1:4000";
	const char *tag = v6 ? "straddr6" : "straddr";
	uint8_t a[LT_ADDR_MAX];
	struct fid_av *av;
	const char *s;
	char buf[128];
	size_t len;

	if (!LT_CHECK_RET(open_av(dom, FI_AV_TABLE, 0, &av), 0, "%s: open", tag))
		return;
	memset(a, 0, sizeof(a));
	if (v6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) a;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(4000);
		sin6->sin6_addr = in6addr_loopback;
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *) a;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(4000);
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}

	len = sizeof(buf);
	s = fi_av_straddr(av, a, buf, &len);
	LT_CHECK(s == buf && !strcmp(buf, want) && len == strlen(want) + 1,
		 "%s: \"%s\" (got \"%s\", len %zu)", tag, want, s ? s : "(null)", len);

	memset(buf, 'x', sizeof(buf));
	len = 10;
	s = fi_av_straddr(av, a, buf, &len);
	LT_CHECK(s == buf && buf[9] == '\0' && !strncmp(buf, want, 9) && len == strlen(want) + 1,
		 "%s: truncated to 10, NUL-terminated, size needed back (len %zu)", tag, len);

	memset(buf, 'x', sizeof(buf));
	len = 0;
	s = fi_av_straddr(av, a, buf, &len);
	LT_CHECK(buf[0] == 'x' && len == strlen(want) + 1,
		 "%s: len 0 writes nothing, size needed back (len %zu)", tag, len);

	/* an address of another format */
	((struct sockaddr *) a)->sa_family = AF_UNIX;
	len = sizeof(buf);
	s = fi_av_straddr(av, a, buf, &len);
	if (lt_is_layer())
		LT_CHECK(s == NULL, "%s: foreign family gives NULL", tag);
	else
		lt_note("%s: foreign family gives %s", tag, s ? s : "NULL");

	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: close", tag);
}

/* ---- ofi_layer's reverse lookup extension ---- */

static void test_reverse(struct lt_dom *dom)
{
	struct sockaddr_in a[20], other;
	fi_addr_t fi_addr[20], got[20], one;
	struct fi_layer_av_ops *ops = NULL;
	struct fid_av *av;
	bool ok = true;
	int i, ret;

	if (!lt_is_layer() || !LT_CHECK_RET(open_av(dom, FI_AV_MAP, 0, &av), 0, "reverse: open"))
		return;
	for (i = 0; i < 20; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].sin_family = AF_INET;
		a[i].sin_port = htons(8200);
		a[i].sin_addr.s_addr = htonl(0x0a0e0000u + (uint32_t) i);
	}
	LT_CHECK_RET(fi_av_insert(av, a, 20, fi_addr, 0, NULL), 20, "reverse: insert 20");
	LT_CHECK_RET(fi_av_remove(av, &fi_addr[3], 1, 0), 0, "reverse: remove one");
	ret = fi_open_ops(&av->fid, FI_LAYER_AV_OPS, 0, (void **) &ops, NULL);
	if (!LT_CHECK_RET(ret, 0, "reverse: fi_open_ops(FI_LAYER_AV_OPS)"))
		goto out;
	memset(a[0].sin_zero, 0x5a, sizeof(a[0].sin_zero));
	LT_CHECK(ops->reverse_lookup(av, &a[0], sizeof(a[0]), &one) == 0 && one == fi_addr[0],
		 "reverse: one address (padding ignored)");
	LT_CHECK_RET(ops->reverse_lookup(av, &a[3], sizeof(a[3]), &one), -FI_ENODATA,
		     "reverse: a removed address");
	other = a[1];
	other.sin_family = AF_INET6;
	LT_CHECK_RET(ops->reverse_lookup(av, &other, sizeof(other), &one), -FI_EINVAL,
		     "reverse: not an address of the format");
	LT_CHECK_RET(ops->reverse_lookupv(av, a, sizeof(a[0]), 20, got), 0, "reverse: 20 at once");
	for (i = 0; i < 20; i++)
		ok = ok && got[i] == (i == 3 ? FI_ADDR_NOTAVAIL : fi_addr[i]);
	LT_CHECK(ok, "reverse: each fi_addr, FI_ADDR_NOTAVAIL for the removed one");
	LT_CHECK_RET(ops->reverse_lookupv(av, a, 4, 2, got), -FI_EINVAL,
		     "reverse: addrlen too short");
	LT_CHECK_RET(fi_open_ops(&av->fid, "no-such-ops", 0, (void **) &ops, NULL), -FI_ENOSYS,
		     "reverse: unknown ops name");
out:
	LT_CHECK_RET(fi_close(&av->fid), 0, "reverse: close");
}

/* ---- rx_ctx_bits, fi_rx_addr ---- */

static void test_rx_bits(struct lt_dom *dom, enum fi_av_type type, int bits, const char *tag)
{
	struct sockaddr_in a[3], got;
	fi_addr_t fi_addr[3];
	struct fid_av *av;
	size_t len;
	int i, ret;

	if (!LT_CHECK_RET(open_av(dom, type, bits, &av), 0, "%s: open", tag))
		return;
	for (i = 0; i < 3; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].sin_family = AF_INET;
		a[i].sin_port = htons(8100);
		a[i].sin_addr.s_addr = htonl(0x0a0d0000u + (uint32_t) i);
	}
	ret = fi_av_insert(av, a, 3, fi_addr, 0, NULL);
	LT_CHECK_RET(ret, 3, "%s: insert", tag);
	for (i = 0; i < 3 && ret == 3; i++) {
		LT_CHECK(!(fi_addr[i] >> (64 - bits)), "%s: top %d bits of fi_addr %d clear", tag,
			 bits, i);
		len = sizeof(got);
		LT_CHECK(fi_av_lookup(av, fi_rx_addr(fi_addr[i], 0, bits), &got, &len) == 0 &&
				 !memcmp(&got, &a[i], sizeof(got)),
			 "%s: fi_rx_addr(fi_addr, 0, %d) names the entry", tag, bits);
	}
	if (lt_is_layer()) {
		len = sizeof(got);
		LT_CHECK_RET(fi_av_lookup(av, fi_rx_addr(fi_addr[0], 1, bits), &got, &len),
			     -FI_EINVAL, "%s: rx index 1 of one receive context refused", tag);
	}
	LT_CHECK_RET(fi_close(&av->fid), 0, "%s: close", tag);
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct lt_dom dom;
	int ret;

	lt_begin(argv[0]);
	alarm(HANG_GUARD_S);
	hints = lt_hints(FI_MSG);
	info = lt_getinfo_or_skip(hints);
	if (LT_CHECK(info->addr_format == FI_SOCKADDR_IN, "IPv4 domain") &&
	    LT_CHECK_RET(lt_dom_open(info, &dom), 0, "fabric and domain")) {
		test_insertsvc(&dom);
		test_straddr(&dom, false);
		test_insertsym_v4(&dom);
		test_map_handles(&dom);
		test_reverse(&dom);
		test_rx_bits(&dom, FI_AV_TABLE, 8, "rx table 8");
		test_rx_bits(&dom, FI_AV_MAP, 8, "rx map 8");
		test_rx_bits(&dom, FI_AV_MAP, 16, "rx map 16");
		test_rx_bits(&dom, FI_AV_TABLE, 40, "rx table 40");
		lt_dom_close(&dom);
	}
	fi_freeinfo(info);

	hints->addr_format = FI_SOCKADDR_IN6;
	ret = fi_getinfo(LT_FI_VERSION, "::1", NULL, FI_SOURCE, hints, &info);
	if (!ret && info->addr_format == FI_SOCKADDR_IN6) {
		if (LT_CHECK_RET(lt_dom_open(info, &dom), 0, "IPv6 fabric and domain")) {
			test_insertsym_v6(&dom);
			test_straddr(&dom, true);
			lt_dom_close(&dom);
		}
	} else {
		lt_note("no IPv6 info on ::1 (%s): IPv6 ranges not checked", fi_strerror(-ret));
	}
	if (!ret)
		fi_freeinfo(info);
	fi_freeinfo(hints);
	return lt_end();
}
