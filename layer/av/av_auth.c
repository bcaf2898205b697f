/*
 * User IDs (FI_AV_USER_ID) and authorization keys (fi_av(3) 1.20) of ofi_layer's AVs.
 *
 * User IDs: an array by table index, created when first needed. On an AV opened with
 * FI_AV_USER_ID every entry starts at FI_ADDR_NOTAVAIL and fi_av_set_user_id changes it;
 * otherwise the FI_AV_USER_ID insertion flag sets them, and entries inserted without it
 * report their own fi_addr. They are process-local, also on a named AV.
 *
 * Keys: a second util table (key bytes, length first) with, per key, the endpoints that hold
 * it, the addresses inserted with it and its user ID; per address entry, the key it was
 * inserted with (entry_keys). A key is removed only when no enabled endpoint holds it and no
 * address was inserted with it (-FI_EBUSY), so an address never loses its key silently.
 * Named AVs have no keys (their entries would name keys of one process only).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rdma/fi_ext_layer.h>

#include "layer/av/av.h"

/* key table entries: the length, then the key zero-padded */
#define LAYER_AV_KEY_LEN (1 + FI_LAYER_AUTH_KEY_MAX_SIZE)
#define LAYER_AV_KEY_CHECK_MASK ((1u << LAYER_AV_CHECK_BITS) - 1)

struct layer_av_keys {
	struct util_av_table table;
	uint32_t salt;
	size_t cap;             /* entries of the arrays below */
	uint32_t *refs;         /* enabled endpoints holding the key */
	uint32_t *users;        /* address entries inserted with the key */
	fi_addr_t *user_ids;    /* fi_av_set_user_id(FI_AUTH_KEY) */
};

static inline fi_addr_t layer_av_key_handle(const struct layer_av_keys *keys, size_t index)
{
	uint32_t gen = util_av_table_gen(&keys->table, index);

	return LAYER_AV_KEY_TAG << LAYER_AV_TAG_SHIFT |
	       (fi_addr_t) ((gen ^ keys->salt) & LAYER_AV_KEY_CHECK_MASK) << 32 | index;
}

/* The live key index a handle names: 0 and *index, or -FI_EINVAL. Lock held. */
static int layer_av_key_resolve(const struct layer_av *av, fi_addr_t key, size_t *index)
{
	const struct layer_av_keys *keys = av->keys;
	uint32_t gen;
	size_t idx;

	if (!keys || key >> LAYER_AV_TAG_SHIFT != LAYER_AV_KEY_TAG)
		return -FI_EINVAL;
	idx = (size_t) (key & UINT32_MAX);
	if (util_av_table_read(&keys->table, idx, NULL, &gen) ||
	    ((gen ^ keys->salt) & LAYER_AV_KEY_CHECK_MASK) !=
		    ((key >> 32) & LAYER_AV_KEY_CHECK_MASK))
		return -FI_EINVAL;
	*index = idx;
	return 0;
}

uint32_t layer_av_key_index(struct layer_av *av, fi_addr_t key)
{
	size_t index;

	return layer_av_key_resolve(av, key, &index) ? 0 : (uint32_t) index + 1;
}

int layer_av_keys_init(struct layer_av *av)
{
	/* created with the first key: most AVs never see one */
	av->keys = NULL;
	return 0;
}

void layer_av_keys_fini(struct layer_av *av)
{
	struct layer_av_keys *keys = av->keys;

	if (!keys)
		return;
	util_av_table_fini(&keys->table);
	free(keys->refs);
	free(keys->users);
	free(keys->user_ids);
	free(keys);
	av->keys = NULL;
}

static int layer_av_keys_create(struct layer_av *av)
{
	struct layer_av_keys *keys = calloc(1, sizeof(*keys));
	int ret;

	if (!keys)
		return -FI_ENOMEM;
	ret = util_av_table_init(&keys->table, LAYER_AV_KEY_LEN, 0);
	if (ret) {
		free(keys);
		return ret;
	}
	if (getrandom(&keys->salt, sizeof(keys->salt), 0) != sizeof(keys->salt))
		keys->salt = av->salt * 2654435761u;
	keys->salt |= 1;
	av->keys = keys;
	return 0;
}

/* Grows an array of elements to cap entries, the new ones filled with the byte fill. */
static int layer_av_grow(void **array, size_t *cap, size_t want, size_t size, int fill)
{
	size_t new_cap = *cap ? *cap : 64;
	void *grown;

	while (new_cap < want)
		new_cap *= 2;
	if (new_cap == *cap)
		return 0;
	grown = realloc(*array, new_cap * size);
	if (!grown)
		return -FI_ENOMEM;
	memset((uint8_t *) grown + *cap * size, fill, (new_cap - *cap) * size);
	*array = grown;
	*cap = new_cap;
	return 0;
}

static int layer_av_keys_grow(struct layer_av_keys *keys, size_t want)
{
	size_t cap = keys->cap, refs_cap = keys->cap, users_cap = keys->cap;
	int ret;

	if (want <= keys->cap)
		return 0;
	/* each array grows to the same capacity; cap moves only when all did */
	ret = layer_av_grow((void **) &keys->refs, &refs_cap, want, sizeof(*keys->refs), 0);
	if (!ret)
		ret = layer_av_grow((void **) &keys->users, &users_cap, want,
				    sizeof(*keys->users), 0);
	if (!ret)
		ret = layer_av_grow((void **) &keys->user_ids, &cap, want,
				    sizeof(*keys->user_ids), 0xff);
	if (ret)
		return ret;
	keys->cap = cap;
	return 0;
}

/*
 * The user ID array, created on first need: on an AV opened without FI_AV_USER_ID, entries
 * already live report their own fi_addr.
 */
static int layer_av_user_ids_cover(struct layer_av *av, size_t index)
{
	bool is_new = !av->user_ids;
	size_t i;
	int ret;

	if (index < av->user_ids_cap)
		return 0;
	ret = layer_av_grow((void **) &av->user_ids, &av->user_ids_cap, index + 1,
			    sizeof(*av->user_ids), 0xff);
	if (ret || !is_new || av->has_user_id_attr)
		return ret;
	for (i = 0; i < util_av_table_end(&av->table); i++) {
		if (util_av_table_is_live(&av->table, i))
			av->user_ids[i] = layer_av_index_to_fi_addr(av, i);
	}
	return 0;
}

int layer_av_entry_added(struct layer_av *av, size_t index, fi_addr_t fi_addr,
			 const fi_addr_t *id_in, uint64_t flags, uint32_t key_index)
{
	int ret;

	if (flags & FI_AV_USER_ID) {
		/* the ID is read before the caller overwrites the slot with fi_addr */
		ret = layer_av_user_ids_cover(av, index);
		if (ret)
			return ret;
		av->user_ids[index] = *id_in;
	} else if (av->user_ids) {
		ret = layer_av_user_ids_cover(av, index);
		if (ret)
			return ret;
		av->user_ids[index] = av->has_user_id_attr ? FI_ADDR_NOTAVAIL : fi_addr;
	}

	if (key_index) {
		ret = layer_av_grow((void **) &av->entry_keys, &av->entry_keys_cap, index + 1,
				    sizeof(*av->entry_keys), 0);
		if (ret)
			return ret;
		av->entry_keys[index] = key_index;
		av->keys->users[key_index - 1]++;
	} else if (av->entry_keys && index < av->entry_keys_cap) {
		av->entry_keys[index] = 0;
	}
	return 0;
}

void layer_av_entries_removed(struct layer_av *av, const size_t *index, size_t count)
{
	uint32_t key_index;
	size_t i;

	for (i = 0; av->entry_keys && i < count; i++) {
		if (index[i] >= av->entry_keys_cap)
			continue;
		key_index = av->entry_keys[index[i]];
		if (key_index)
			av->keys->users[key_index - 1]--;
		av->entry_keys[index[i]] = 0;
	}
}

/* ---- fi_av_insert_auth_key, fi_av_lookup_auth_key, fi_av_set_user_id ---- */

int layer_av_insert_auth_key(struct fid_av *av_fid, const void *auth_key, size_t auth_key_size,
			     fi_addr_t *fi_addr, uint64_t flags)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	uint8_t key[LAYER_AV_KEY_LEN] = { 0 };
	size_t index;
	int ret;

	if (flags || !auth_key || !fi_addr || auth_key_size < FI_LAYER_AUTH_KEY_MIN_SIZE ||
	    auth_key_size > FI_LAYER_AUTH_KEY_MAX_SIZE) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert_auth_key: %s\n",
			flags ? "flags must be 0" : !auth_key || !fi_addr ? "NULL argument" :
			"a key is 1 to 32 bytes");
		return -FI_EINVAL;
	}
	if (!av->has_auth_keys || av->shm) {
		FI_WARN(&layer_prov, FI_LOG_AV, "insert_auth_key: no authorization keys on this "
			"av (domain without FI_AV_AUTH_KEY, or a named av)\n");
		return -FI_EOPNOTSUPP;
	}
	key[0] = (uint8_t) auth_key_size;
	memcpy(key + 1, auth_key, auth_key_size);

	util_lock_acquire(&av->lock);
	ret = av->keys ? 0 : layer_av_keys_create(av);
	if (!ret)
		ret = util_av_table_insert(&av->keys->table, key, &index, NULL);
	if (!ret) {
		ret = layer_av_keys_grow(av->keys, index + 1);
		if (ret)
			util_av_table_remove(&av->keys->table, index);
	}
	if (!ret) {
		av->keys->refs[index] = 0;
		av->keys->users[index] = 0;
		av->keys->user_ids[index] = FI_ADDR_NOTAVAIL;
		*fi_addr = layer_av_key_handle(av->keys, index);
	}
	util_lock_release(&av->lock);
	return ret;
}

int layer_av_lookup_auth_key(struct fid_av *av_fid, fi_addr_t addr, void *auth_key,
			     size_t *auth_key_size)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	const uint8_t *key = NULL;
	size_t index, len = 0;
	uint32_t key_index;
	int ret;

	if (!auth_key_size || (*auth_key_size && !auth_key))
		return -FI_EINVAL;

	util_lock_acquire(&av->lock);
	if (addr >> LAYER_AV_TAG_SHIFT == LAYER_AV_KEY_TAG) {
		ret = layer_av_key_resolve(av, addr, &index);
		if (!ret)
			key = util_av_table_get(&av->keys->table, index);
	} else {
		/* an address: the key it was inserted with, none (size 0) if none */
		ret = layer_av_resolve(av, addr, NULL, &index);
		key_index = !ret && av->entry_keys && index < av->entry_keys_cap ?
			    av->entry_keys[index] : 0;
		if (key_index)
			key = util_av_table_get(&av->keys->table, key_index - 1);
	}
	if (key) {
		len = key[0];
		/* a size query may pass no buffer */
		if (*auth_key_size)
			memcpy(auth_key, key + 1, UTIL_MIN(len, *auth_key_size));
	}
	util_lock_release(&av->lock);

	if (ret) {
		FI_WARN(&layer_prov, FI_LOG_AV, "lookup_auth_key: %#" PRIx64 " is not in the av\n",
			(uint64_t) addr);
		return ret;
	}
	*auth_key_size = len;
	return 0;
}

int layer_av_set_user_id(struct fid_av *av_fid, fi_addr_t fi_addr, fi_addr_t user_id,
			 uint64_t flags)
{
	struct layer_av *av = container_of(av_fid, struct layer_av, av_fid);
	size_t index;
	int ret;

	if (flags & ~FI_AUTH_KEY) {
		FI_WARN(&layer_prov, FI_LOG_AV, "set_user_id: unknown flags 0x%" PRIx64 "\n",
			flags);
		return -FI_EINVAL;
	}
	/* fi_av(3) 1.20: for AVs opened with FI_AV_USER_ID */
	if (!av->has_user_id_attr) {
		FI_WARN(&layer_prov, FI_LOG_AV, "set_user_id: av opened without FI_AV_USER_ID\n");
		return -FI_EINVAL;
	}

	util_lock_acquire(&av->lock);
	if (flags & FI_AUTH_KEY) {
		ret = layer_av_key_resolve(av, fi_addr, &index);
		if (!ret)
			av->keys->user_ids[index] = user_id;
	} else {
		ret = layer_av_resolve(av, fi_addr, NULL, &index);
		if (!ret)
			ret = layer_av_user_ids_cover(av, index);
		if (!ret)
			av->user_ids[index] = user_id;
	}
	util_lock_release(&av->lock);
	if (ret)
		FI_WARN(&layer_prov, FI_LOG_AV, "set_user_id: %#" PRIx64 " is not in the av\n",
			(uint64_t) fi_addr);
	return ret;
}

/* ---- removal of keys, and the endpoints' hold on them ---- */

int layer_av_remove_keys(struct layer_av *av, const fi_addr_t *fi_addr, size_t count)
{
	size_t *index, i;
	int ret = 0;

	if (!count)
		return 0;
	index = calloc(count, sizeof(*index));
	if (!index)
		return -FI_ENOMEM;

	util_lock_acquire(&av->lock);
	for (i = 0; i < count && !ret; i++) {
		ret = layer_av_key_resolve(av, fi_addr[i], &index[i]);
		if (ret) {
			FI_WARN(&layer_prov, FI_LOG_AV, "remove: %#" PRIx64 " is not a key\n",
				(uint64_t) fi_addr[i]);
		} else if (av->keys->refs[index[i]] || av->keys->users[index[i]]) {
			FI_WARN(&layer_prov, FI_LOG_AV, "remove: key %#" PRIx64 " is in use by %u "
				"endpoints and %u addresses\n", (uint64_t) fi_addr[i],
				av->keys->refs[index[i]], av->keys->users[index[i]]);
			ret = -FI_EBUSY;
		}
	}
	if (!ret)
		ret = util_av_table_remove_list(&av->keys->table, index, count);
	util_lock_release(&av->lock);
	free(index);
	return ret;
}

static void layer_av_key_unref(struct layer_av *av, fi_addr_t key)
{
	size_t index;

	util_lock_acquire(&av->lock);
	if (!layer_av_key_resolve(av, key, &index) && av->keys->refs[index])
		av->keys->refs[index]--;
	util_lock_release(&av->lock);
}

int layer_av_keys_ref_all(struct layer_av *av, fi_addr_t **keys, size_t *count)
{
	size_t i, n = 0, end;
	fi_addr_t *handles;

	*keys = NULL;
	*count = 0;
	util_lock_acquire(&av->lock);
	if (!av->keys || !util_av_table_count(&av->keys->table)) {
		util_lock_release(&av->lock);
		return 0;
	}
	handles = malloc(util_av_table_count(&av->keys->table) * sizeof(*handles));
	if (!handles) {
		util_lock_release(&av->lock);
		return -FI_ENOMEM;
	}
	end = util_av_table_end(&av->keys->table);
	for (i = 0; i < end; i++) {
		if (!util_av_table_is_live(&av->keys->table, i))
			continue;
		av->keys->refs[i]++;
		handles[n++] = layer_av_key_handle(av->keys, i);
	}
	util_lock_release(&av->lock);
	*keys = handles;
	*count = n;
	return 0;
}

void layer_av_keys_unref_all(struct layer_av *av, fi_addr_t *keys, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		layer_av_key_unref(av, keys[i]);
	free(keys);
}

void layer_av_index_key(struct layer_av *av, size_t index, fi_addr_t *handle,
			struct layer_key *key)
{
	const uint8_t *bytes;
	uint32_t key_index;

	*handle = FI_ADDR_NOTAVAIL;
	key->len = 0;
	util_lock_acquire(&av->lock);
	key_index = av->entry_keys && index < av->entry_keys_cap ? av->entry_keys[index] : 0;
	if (key_index) {
		bytes = util_av_table_get(&av->keys->table, key_index - 1);
		*handle = layer_av_key_handle(av->keys, key_index - 1);
		key->len = bytes[0];
		memcpy(key->bytes, bytes + 1, key->len);
	}
	util_lock_release(&av->lock);
}

fi_addr_t layer_av_keys_find(struct layer_av *av, const fi_addr_t *handles, size_t count,
			     const struct layer_key *key)
{
	fi_addr_t found = FI_ADDR_NOTAVAIL;
	const uint8_t *bytes;
	size_t i, index;

	if (!key->len)
		return FI_ADDR_NOTAVAIL;
	util_lock_acquire(&av->lock);
	for (i = 0; i < count; i++) {
		if (layer_av_key_resolve(av, handles[i], &index))
			continue;
		bytes = util_av_table_get(&av->keys->table, index);
		if (bytes[0] == key->len && !memcmp(bytes + 1, key->bytes, key->len)) {
			found = handles[i];
			break;
		}
	}
	util_lock_release(&av->lock);
	return found;
}
