/* imid's floor: the same work as every imid command, written as plainly as a Redis module can be,
 * straight against redismodule.h. server-bench/instructions.py counts instructions per call (callgrind,
 * inside Redis's call()) for each imid command and for its floor command here; the ratio says how
 * far imid's glue is from what the work itself costs on the same server.
 *
 * "The same work" means the same arguments, checks, state and reply as imid's command in its
 * default configuration on a standalone server, and the same side effects on keys (touching the
 * key for WATCH, a keyspace event, replication): only the way of getting there may be cheaper.
 * Not reproduced, because they cost nothing measurable per call or are not per-call work:
 * imid's INFO counters, the never-reissue gap of sequences (a flag in the stored word), the
 * message-ID time lease (one MSGID.FLOOR every 2.5 s), the `slot` hash mode (cluster only), and
 * the exact texts of error replies (they name the rule, not its position).
 *
 *   floor.noop [arg ...]                          replies +PONG: what a module command costs at all
 *   floor.msgid.gen ct target                     clock, per-ms counter, Java hash, 19-char reply
 *   floor.msgid.encode time seq ct hash           four range checks, 19-char reply
 *   floor.msgid.decode msgid                      strict parse, 4 named fields
 *   floor.msgid.hash target                       Java String.hashCode() of UTF-8, low 22 bits
 *   floor.msgid.floor time_ms                     raise the generator floor, replicate verbatim
 *   floor.seq.next key [COUNT n]                  one-word value in the pointer, verbatim replication
 *   floor.seq.get key / floor.seq.mget key...     read; 0 when missing
 *   floor.seq.set key value / floor.seq.advance   write only on a change
 *   floor.seq.next key [COUNT n] IDMP token       the same, at most once per token: [last, dup]
 *   floor.seq.hnext key field [COUNT n]           a field of a sequence map, 0 when missing
 *   floor.seq.hget key field                      read one field; 0 when missing
 *   floor.seq.hadvance key field value [LIMIT seqkey]   max(current, min(value, seqkey))
 *   floor.seq.hset key field value [field value ...]   seeding; write only on a change
 *   floor.openid.enc msgid type dir               plain format (MurmurHash2 check, XOR, base64url)
 *   floor.openid.dec openid                       plain format, 4 named fields
 *   floor.openid.enck / floor.openid.deck         keyed format (AES-128 Feistel, keyed check), with
 *                                                 AES-NI; only registered when the CPU has it
 *   floor.uid.gen target [COUNT n]                Snowflake 41,10,12 from 2026-01-01, node 0
 *   floor.uid.decode uid / floor.uid.encode t n s
 *   floor.zadd.api key score member               one sorted-set write through the key API (IM.SEND's)
 *   floor.zadd.call key score member              the same through RedisModule_Call of ZADD
 *
 * Sequence maps (SEQ.H*): the floor keeps a plain open-addressing hash table in a module type of
 * its own (FNV-1a of the field, linear probing, grown at 3/4 load; each slot holds the hash, a
 * pointer to a length-prefixed copy of the field and the value), the cheapest native way C has
 * to reach a field in O(1). A Redis hash driven through RedisModule_HashGet/HashSet would be
 * plainer to write but slower (it creates string objects per call), and HINCRBY/HGET, Redis's
 * own hash commands, are measured beside it as references (server-bench/instructions.py). Compactness
 * is not the floor's business: server-bench/maps.py measures imid's memory against Redis's hash.
 *
 * IDMP (SEQ.NEXT ... IDMP token): a key that used a token holds a struct instead of the bare
 * word: the value and a ring of the last IDMP_MAX tokens (length, bytes, expiry time, the
 * reply's last), looked up by a linear scan. Tokens older than IDMP_TTL_MS are dropped when the
 * key is next used; the newest IDMP_MAX are kept. Not reproduced: their persistence (the rows
 * measure calls, not RDB files) and an exact replication of expiry (the floor replicates as
 * called).
 *
 * Load: --loadmodule floor.so [32-hex-digit key for the keyed commands; default 000102..0f]
 * Build: gcc -O2 -fPIC -shared -I<dir of the redis-module crate's redismodule.h> floor.c */
#include "redismodule.h"
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define FLOOR_HAVE_AESNI 1
#endif

#define ERR_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

static uint64_t now_ms(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

/* An integer argument in min..max (Redis's strict string2ll: no spaces, no leading zeros). */
static int int_arg(RedisModuleString *s, long long min, long long max, long long *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < min || v > max) return 0;
    *out = v;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Message IDs: 42-bit time, 12-bit seq, 4-bit channel type, 22-bit hash; base32hex text.     */

#define MAX_TIME ((1ULL << 42) - 1)
#define MAX_HASH ((1U << 22) - 1)
#define MASK40 ((1ULL << 40) - 1)
static const char B32[] = "0123456789ABCDEFGHIJKLMNOPQRSTUV";
static int8_t B32_VAL[256];

/* The 80 bits as two 40-bit halves: the first 8 symbols and the last 8. */
static void fields_to_halves(uint64_t time, uint64_t seq, uint64_t ct, uint64_t hash, uint64_t *hi,
                             uint64_t *lo) {
    *hi = time >> 2;
    *lo = ((time & 3) << 38) | (seq << 26) | (ct << 22) | hash;
}

static void msgid_text(uint64_t hi, uint64_t lo, char out[19]) {
    for (int i = 0; i < 8; i++) {
        out[i + i / 4] = B32[(hi >> (35 - 5 * i)) & 31];
        out[10 + i + i / 4] = B32[(lo >> (35 - 5 * i)) & 31];
    }
    out[4] = out[9] = out[14] = '-';
}

static int msgid_parse(const char *s, size_t len, uint64_t *hi, uint64_t *lo) {
    if (len != 19 || s[4] != '-' || s[9] != '-' || s[14] != '-') return 0;
    uint64_t h = 0, l = 0;
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        int a = B32_VAL[(unsigned char)s[i + i / 4]], b = B32_VAL[(unsigned char)s[10 + i + i / 4]];
        bad |= a | b; /* negative if any symbol is invalid */
        h = (h << 5) | (uint64_t)(a & 31);
        l = (l << 5) | (uint64_t)(b & 31);
    }
    if (bad < 0) return 0;
    *hi = h;
    *lo = l;
    return 1;
}

static void halves_to_bytes(uint64_t hi, uint64_t lo, uint8_t b[10]) {
    for (int i = 0; i < 5; i++) {
        b[i] = (uint8_t)(hi >> (32 - 8 * i));
        b[5 + i] = (uint8_t)(lo >> (32 - 8 * i));
    }
}

static void bytes_to_halves(const uint8_t b[10], uint64_t *hi, uint64_t *lo) {
    uint64_t h = 0, l = 0;
    for (int i = 0; i < 5; i++) {
        h = (h << 8) | b[i];
        l = (l << 8) | b[5 + i];
    }
    *hi = h;
    *lo = l;
}

static uint64_t halves_time(uint64_t hi, uint64_t lo) { return (hi << 2) | (lo >> 38); }

/* Java's String.hashCode() of the UTF-8 target (strict UTF-8, UTF-16 code units), low 22 bits. */
static int java_hash22(const unsigned char *s, size_t n, uint32_t *out) {
    uint32_t h = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t c = s[i];
        if (c < 0x80) {
            h = 31 * h + c;
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return 0;
        if (n - i < len) return 0;
        for (size_t k = 1; k < len; k++) {
            uint32_t d = s[i + k];
            if ((d & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
        if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
        i += len;
    }
    *out = h & MAX_HASH;
    return 1;
}

static int reply_hash_error(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR target must be valid UTF-8 in java hash mode");
}

/* One generator per node: time = max(now, last, floor); 4096 per ms, then borrow the next ms. */
static uint64_t gen_last = 0, gen_floor = 0;
static uint32_t gen_seq = 0;

static int noop(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    return RedisModule_ReplyWithSimpleString(ctx, "PONG");
}

static int msgid_gen(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long ct;
    if (!int_arg(argv[1], 0, 15, &ct)) return RedisModule_ReplyWithError(ctx, "ERR channel_type must be an integer in 0..15");
    size_t len;
    const char *t = RedisModule_StringPtrLen(argv[2], &len);
    uint32_t hash;
    if (!java_hash22((const unsigned char *)t, len, &hash)) return reply_hash_error(ctx);
    uint64_t now = now_ms();
    if (now < gen_floor) now = gen_floor;
    uint64_t time = gen_last, seq = gen_seq;
    if (now > time) { time = now; seq = 0; }
    else if (++seq == 4096) { time++; seq = 0; }
    if (time > MAX_TIME) return RedisModule_ReplyWithError(ctx, "ERR message id time field exhausted");
    gen_last = time;
    gen_seq = (uint32_t)seq;
    uint64_t hi, lo;
    fields_to_halves(time, seq, (uint64_t)ct, hash, &hi, &lo);
    char out[19];
    msgid_text(hi, lo, out);
    return RedisModule_ReplyWithStringBuffer(ctx, out, 19);
}

static int msgid_encode(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    long long time, seq, ct, hash;
    if (!int_arg(argv[1], 0, (long long)MAX_TIME, &time)) return RedisModule_ReplyWithError(ctx, "ERR time_ms must be an integer in 0..4398046511103");
    if (!int_arg(argv[2], 0, 4095, &seq)) return RedisModule_ReplyWithError(ctx, "ERR seq must be an integer in 0..4095");
    if (!int_arg(argv[3], 0, 15, &ct)) return RedisModule_ReplyWithError(ctx, "ERR channel_type must be an integer in 0..15");
    if (!int_arg(argv[4], 0, MAX_HASH, &hash)) return RedisModule_ReplyWithError(ctx, "ERR hash must be an integer in 0..4194303");
    uint64_t hi, lo;
    fields_to_halves((uint64_t)time, (uint64_t)seq, (uint64_t)ct, (uint64_t)hash, &hi, &lo);
    char out[19];
    msgid_text(hi, lo, out);
    return RedisModule_ReplyWithStringBuffer(ctx, out, 19);
}

static int reply_msgid_error(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR invalid message id: expected XXXX-XXXX-XXXX-XXXX in base32hex (0-9, A-V)");
}

static void reply_field_int(RedisModuleCtx *ctx, const char *name, size_t nlen, long long v) {
    RedisModule_ReplyWithStringBuffer(ctx, name, nlen);
    RedisModule_ReplyWithLongLong(ctx, v);
}
#define FIELD(ctx, lit, v) reply_field_int(ctx, lit, sizeof(lit) - 1, (long long)(v))

static int msgid_decode(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *s = RedisModule_StringPtrLen(argv[1], &len);
    uint64_t hi, lo;
    if (!msgid_parse(s, len, &hi, &lo)) return reply_msgid_error(ctx);
    RedisModule_ReplyWithMap(ctx, 4);
    FIELD(ctx, "time", halves_time(hi, lo));
    FIELD(ctx, "seq", (lo >> 26) & 4095);
    FIELD(ctx, "channel_type", (lo >> 22) & 15);
    FIELD(ctx, "hash", lo & MAX_HASH);
    return REDISMODULE_OK;
}

static int msgid_hash(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *t = RedisModule_StringPtrLen(argv[1], &len);
    uint32_t hash;
    if (!java_hash22((const unsigned char *)t, len, &hash)) return reply_hash_error(ctx);
    return RedisModule_ReplyWithLongLong(ctx, hash);
}

static int msgid_floor(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    long long ms;
    if (!int_arg(argv[1], 0, INT64_MAX, &ms)) return RedisModule_ReplyWithError(ctx, "ERR time_ms must be an integer in 0..9223372036854775807");
    int from_client = !(RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_REPLICATED));
    if (from_client && (uint64_t)ms > now_ms() + 60000) return RedisModule_ReplyWithError(ctx, "ERR time_ms must be at most 60000 ms ahead of the server clock");
    if ((uint64_t)ms > gen_floor) gen_floor = (uint64_t)ms;
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ------------------------------------------------------------------------------------------ */
/* Sequences: the value lives in the pointer word (value + 1, so that 0 is never a null value).  */

#define SEQ_MAX ((uint64_t)INT64_MAX)
static RedisModuleType *SeqType;

static uint64_t seq_of(void *p) { return (uint64_t)(uintptr_t)p - 1; }
static void *seq_ptr(uint64_t v) { return (void *)(uintptr_t)(v + 1); }

/* Opens `name`: 1 = a sequence (*v set), 0 = missing (*v = 0), -1 = another type (key closed). */
static int seq_open(RedisModuleCtx *ctx, RedisModuleString *name, int mode, RedisModuleKey **k, uint64_t *v) {
    *k = RedisModule_OpenKey(ctx, name, mode);
    int t = RedisModule_KeyType(*k);
    if (t == REDISMODULE_KEYTYPE_EMPTY) {
        *v = 0;
        return 0;
    }
    if (t != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(*k) != SeqType) {
        RedisModule_CloseKey(*k);
        return -1;
    }
    *v = seq_of(RedisModule_ModuleTypeGetValue(*k));
    return 1;
}

/* Stores v (keeping the TTL of an existing key), closes, and does what every change does: touch
 * the key for WATCH (the module sets NO_IMPLICIT_SIGNAL_MODIFIED, so no-ops touch nothing), a
 * keyspace event, and replication as called (every write here replays to the same state). */
static void seq_write(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey *k, int existed, uint64_t v, const char *event) {
    if (existed) RedisModule_ModuleTypeReplaceValue(k, SeqType, seq_ptr(v), NULL);
    else RedisModule_ModuleTypeSetValue(k, SeqType, seq_ptr(v));
    RedisModule_CloseKey(k);
    RedisModule_SignalModifiedKey(ctx, name);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, event, name);
    RedisModule_ReplicateVerbatim(ctx);
}

static int seq_next_idmp(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, long long count, RedisModuleString *token);

static int seq_next(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long count = 1;
    if (argc == 4 || argc == 6) { /* [COUNT n] IDMP token: the options in either order */
        size_t olen;
        const char *opt = RedisModule_StringPtrLen(argv[argc - 2], &olen);
        if (olen == 4 && strncasecmp(opt, "IDMP", 4) == 0) {
            if (argc == 6) {
                opt = RedisModule_StringPtrLen(argv[2], &olen);
                if (olen != 5 || strncasecmp(opt, "COUNT", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
                if (!int_arg(argv[3], 1, 1000000, &count)) return RedisModule_ReplyWithError(ctx, "ERR COUNT must be an integer in 1..1000000");
            }
            return seq_next_idmp(ctx, argv, argc, count, argv[argc - 1]);
        }
    }
    if (argc == 4) {
        size_t olen;
        const char *opt = RedisModule_StringPtrLen(argv[2], &olen);
        if (olen != 5 || strncasecmp(opt, "COUNT", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
        if (!int_arg(argv[3], 1, 1000000, &count)) return RedisModule_ReplyWithError(ctx, "ERR COUNT must be an integer in 1..1000000");
    } else if (argc != 2) {
        return argc < 2 ? RedisModule_WrongArity(ctx) : RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    RedisModuleKey *k;
    uint64_t v;
    int found = seq_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &v);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    if (SEQ_MAX - v < (uint64_t)count) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "ERR sequence overflow");
    }
    v += (uint64_t)count;
    seq_write(ctx, argv[1], k, found, v, "seq.next");
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static int seq_get(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *k;
    uint64_t v;
    int found = seq_open(ctx, argv[1], REDISMODULE_READ, &k, &v);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    RedisModule_CloseKey(k);
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static int seq_mget(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    int n = argc - 1;
    /* Every key is read before the reply starts: one key of another type fails the command. */
    uint64_t stack[32];
    uint64_t *vals = n <= 32 ? stack : RedisModule_Alloc(sizeof(uint64_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        RedisModuleKey *k;
        if (seq_open(ctx, argv[i + 1], REDISMODULE_READ, &k, &vals[i]) < 0) {
            if (vals != stack) RedisModule_Free(vals);
            return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
        }
        RedisModule_CloseKey(k);
    }
    RedisModule_ReplyWithArray(ctx, n);
    for (int i = 0; i < n; i++) RedisModule_ReplyWithLongLong(ctx, (long long)vals[i]);
    if (vals != stack) RedisModule_Free(vals);
    return REDISMODULE_OK;
}

static int seq_set(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long value;
    if (!int_arg(argv[2], 0, INT64_MAX, &value)) return RedisModule_ReplyWithError(ctx, "ERR value must be an integer in 0..9223372036854775807");
    RedisModuleKey *k;
    uint64_t v;
    int found = seq_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &v);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    if (found && v == (uint64_t)value) RedisModule_CloseKey(k);
    else seq_write(ctx, argv[1], k, found, (uint64_t)value, "seq.set");
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int seq_advance(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long value;
    if (!int_arg(argv[2], 0, INT64_MAX, &value)) return RedisModule_ReplyWithError(ctx, "ERR value must be an integer in 0..9223372036854775807");
    RedisModuleKey *k;
    uint64_t v;
    int found = seq_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &v);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    if ((uint64_t)value > v) {
        v = (uint64_t)value;
        seq_write(ctx, argv[1], k, found, v, "seq.advance");
    } else {
        RedisModule_CloseKey(k);
    }
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static void *seq_rdb_load(RedisModuleIO *rdb, int encver) {
    if (encver != 1) return NULL;
    uint64_t v = RedisModule_LoadUnsigned(rdb);
    return v > SEQ_MAX ? NULL : seq_ptr(v);
}
static void seq_rdb_save(RedisModuleIO *rdb, void *value) { RedisModule_SaveUnsigned(rdb, seq_of(value)); }
static void seq_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RedisModule_EmitAOF(aof, "floor.seq.set", "sl", key, (long long)seq_of(value));
}
static void seq_free(void *value) { (void)value; }

/* ------------------------------------------------------------------------------------------ */
/* IDMP: SEQ.NEXT key [COUNT n] IDMP token. A key that used a token holds this struct; IDMP_MAX
 * and IDMP_TTL_MS are the defaults of imid.seq-idmp-max and imid.seq-idmp-ttl. */

#define IDMP_MAX 1000
#define IDMP_TTL_MS (300 * 1000ULL)
#define TOKEN_MAX 64
static RedisModuleType *IdmpType;

typedef struct {
    uint64_t expires, last;
    uint8_t len;
    char tok[TOKEN_MAX];
} idmp_token;

typedef struct {
    uint64_t value;
    uint32_t head, n, cap; /* ring of cap slots, n used, oldest at head */
    idmp_token *ring;
} idmp_seq;

static void idmp_free(void *p) {
    idmp_seq *s = p;
    RedisModule_Free(s->ring);
    RedisModule_Free(s);
}

static int seq_next_idmp(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, long long count, RedisModuleString *token) {
    (void)argc;
    size_t tlen;
    const char *tok = RedisModule_StringPtrLen(token, &tlen);
    if (tlen < 1 || tlen > TOKEN_MAX) return RedisModule_ReplyWithError(ctx, "ERR IDMP token must be 1..64 bytes");
    RedisModuleKey *k = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int t = RedisModule_KeyType(k);
    idmp_seq *s = NULL;
    int fresh = 0;
    if (t == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(k) == IdmpType) {
        s = RedisModule_ModuleTypeGetValue(k);
    } else if (t == REDISMODULE_KEYTYPE_EMPTY ||
               (t == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(k) == SeqType)) {
        s = RedisModule_Calloc(1, sizeof *s);
        if (t != REDISMODULE_KEYTYPE_EMPTY) s->value = seq_of(RedisModule_ModuleTypeGetValue(k));
        fresh = 1;
    } else {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    }
    uint64_t now = now_ms();
    while (s->n && s->ring[s->head].expires <= now) { /* expired: the oldest first */
        s->head = (s->head + 1) % s->cap;
        s->n--;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        idmp_token *e = &s->ring[(s->head + i) % s->cap];
        if (e->len == tlen && memcmp(e->tok, tok, tlen) == 0) {
            uint64_t last = e->last;
            RedisModule_CloseKey(k);
            RedisModule_ReplyWithArray(ctx, 2);
            RedisModule_ReplyWithLongLong(ctx, (long long)last);
            return RedisModule_ReplyWithLongLong(ctx, 1);
        }
    }
    if (SEQ_MAX - s->value < (uint64_t)count) {
        if (fresh) RedisModule_Free(s);
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "ERR sequence overflow");
    }
    s->value += (uint64_t)count;
    if (s->n == s->cap && s->cap < IDMP_MAX) { /* grow the ring, oldest first at 0 */
        uint32_t cap = s->cap ? s->cap * 2 : 1;
        if (cap > IDMP_MAX) cap = IDMP_MAX;
        idmp_token *ring = RedisModule_Alloc(sizeof *ring * cap);
        for (uint32_t i = 0; i < s->n; i++) ring[i] = s->ring[(s->head + i) % s->cap];
        RedisModule_Free(s->ring);
        s->ring = ring;
        s->head = 0;
        s->cap = cap;
    }
    if (s->n == s->cap) { /* full at IDMP_MAX: the oldest goes */
        s->head = (s->head + 1) % s->cap;
        s->n--;
    }
    idmp_token *e = &s->ring[(s->head + s->n) % s->cap];
    e->expires = now + IDMP_TTL_MS;
    e->last = s->value;
    e->len = (uint8_t)tlen;
    memcpy(e->tok, tok, tlen);
    s->n++;
    uint64_t v = s->value;
    if (fresh) {
        if (t == REDISMODULE_KEYTYPE_EMPTY) RedisModule_ModuleTypeSetValue(k, IdmpType, s);
        else RedisModule_ModuleTypeReplaceValue(k, IdmpType, s, NULL);
    }
    RedisModule_CloseKey(k);
    RedisModule_SignalModifiedKey(ctx, argv[1]);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, "seq.next", argv[1]);
    RedisModule_ReplicateVerbatim(ctx);
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithLongLong(ctx, (long long)v);
    return RedisModule_ReplyWithLongLong(ctx, 0);
}

/* The value only: the tokens are not persisted (see the comment at the top). */
static void *idmp_rdb_load(RedisModuleIO *rdb, int encver) {
    if (encver != 1) return NULL;
    uint64_t v = RedisModule_LoadUnsigned(rdb);
    if (v > SEQ_MAX) return NULL;
    idmp_seq *s = RedisModule_Calloc(1, sizeof *s);
    s->value = v;
    return s;
}
static void idmp_rdb_save(RedisModuleIO *rdb, void *value) { RedisModule_SaveUnsigned(rdb, ((idmp_seq *)value)->value); }
static void seq_aof_rewrite_idmp(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    RedisModule_EmitAOF(aof, "floor.seq.set", "sl", key, (long long)((idmp_seq *)value)->value);
}

/* ------------------------------------------------------------------------------------------ */
/* Sequence maps: an open-addressing table of (hash, field, value).                            */

#define FIELD_MAX 256
static RedisModuleType *MapType;

typedef struct {
    uint64_t hash; /* 0 = empty slot */
    uint8_t *field; /* 2-byte length, then the bytes */
    uint64_t value;
} map_slot;

typedef struct {
    map_slot *slots;
    size_t cap, used; /* cap: a power of two */
} seq_map;

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ULL;
    return h | 1; /* never 0 */
}

static map_slot *map_find(seq_map *m, const char *f, size_t n, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        map_slot *s = &m->slots[i];
        if (s->hash == 0) return s;
        if (s->hash == h && (size_t)(s->field[0] | s->field[1] << 8) == n && memcmp(s->field + 2, f, n) == 0) return s;
    }
}

static seq_map *map_new(void) {
    seq_map *m = RedisModule_Alloc(sizeof *m);
    m->cap = 8;
    m->used = 0;
    m->slots = RedisModule_Calloc(m->cap, sizeof(map_slot));
    return m;
}

static void map_grow(seq_map *m) {
    map_slot *old = m->slots;
    size_t cap = m->cap;
    m->cap *= 2;
    m->slots = RedisModule_Calloc(m->cap, sizeof(map_slot));
    for (size_t i = 0; i < cap; i++) {
        if (!old[i].hash) continue;
        size_t mask = m->cap - 1, j = old[i].hash & mask;
        while (m->slots[j].hash) j = (j + 1) & mask;
        m->slots[j] = old[i];
    }
    RedisModule_Free(old);
}

/* The slot of field f, inserted with value 0 when missing. */
static map_slot *map_upsert(seq_map *m, const char *f, size_t n) {
    uint64_t h = fnv1a(f, n);
    map_slot *s = map_find(m, f, n, h);
    if (s->hash) return s;
    if ((m->used + 1) * 4 > m->cap * 3) {
        map_grow(m);
        s = map_find(m, f, n, h);
    }
    s->hash = h;
    s->field = RedisModule_Alloc(n + 2);
    s->field[0] = (uint8_t)n;
    s->field[1] = (uint8_t)(n >> 8);
    memcpy(s->field + 2, f, n);
    s->value = 0;
    m->used++;
    return s;
}

static void map_free(void *p) {
    seq_map *m = p;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash) RedisModule_Free(m->slots[i].field);
    RedisModule_Free(m->slots);
    RedisModule_Free(m);
}

/* Opens a map: 1 = found (*m set), 0 = missing (*m = NULL), -1 = another type (key closed). */
static int map_open(RedisModuleCtx *ctx, RedisModuleString *name, int mode, RedisModuleKey **k, seq_map **m) {
    *k = RedisModule_OpenKey(ctx, name, mode);
    int t = RedisModule_KeyType(*k);
    *m = NULL;
    if (t == REDISMODULE_KEYTYPE_EMPTY) return 0;
    if (t != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(*k) != MapType) {
        RedisModule_CloseKey(*k);
        return -1;
    }
    *m = RedisModule_ModuleTypeGetValue(*k);
    return 1;
}

static const char *field_arg(RedisModuleString *s, size_t *n) {
    const char *f = RedisModule_StringPtrLen(s, n);
    return *n >= 1 && *n <= FIELD_MAX ? f : NULL;
}

/* After a change: the new map stored if the key was empty, then what seq_write does. */
static void map_changed(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey *k, seq_map *m, int existed, const char *event) {
    if (!existed) RedisModule_ModuleTypeSetValue(k, MapType, m);
    RedisModule_CloseKey(k);
    RedisModule_SignalModifiedKey(ctx, name);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_MODULE, event, name);
    RedisModule_ReplicateVerbatim(ctx);
}

static int seq_hnext(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long count = 1;
    if (argc == 5) {
        size_t olen;
        const char *opt = RedisModule_StringPtrLen(argv[3], &olen);
        if (olen != 5 || strncasecmp(opt, "COUNT", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
        if (!int_arg(argv[4], 1, 1000000, &count)) return RedisModule_ReplyWithError(ctx, "ERR COUNT must be an integer in 1..1000000");
    } else if (argc != 3) {
        return argc < 3 ? RedisModule_WrongArity(ctx) : RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    size_t n;
    const char *f = field_arg(argv[2], &n);
    if (!f) return RedisModule_ReplyWithError(ctx, "ERR field must be 1..256 bytes");
    RedisModuleKey *k;
    seq_map *m;
    int found = map_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &m);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    if (!m) m = map_new();
    map_slot *s = map_upsert(m, f, n);
    if (SEQ_MAX - s->value < (uint64_t)count) {
        /* only a field at the maximum fails, and it exists: nothing was inserted */
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "ERR sequence overflow");
    }
    s->value += (uint64_t)count;
    uint64_t v = s->value;
    map_changed(ctx, argv[1], k, m, found, "seq.hnext");
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static int seq_hget(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    size_t n;
    const char *f = field_arg(argv[2], &n);
    if (!f) return RedisModule_ReplyWithError(ctx, "ERR field must be 1..256 bytes");
    RedisModuleKey *k;
    seq_map *m;
    if (map_open(ctx, argv[1], REDISMODULE_READ, &k, &m) < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    uint64_t v = 0;
    if (m) {
        map_slot *s = map_find(m, f, n, fnv1a(f, n));
        v = s->hash ? s->value : 0;
    }
    RedisModule_CloseKey(k);
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static int seq_hadvance(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4 && argc != 6) return argc < 4 ? RedisModule_WrongArity(ctx) : RedisModule_ReplyWithError(ctx, "ERR syntax error");
    size_t n;
    const char *f = field_arg(argv[2], &n);
    if (!f) return RedisModule_ReplyWithError(ctx, "ERR field must be 1..256 bytes");
    long long value;
    if (!int_arg(argv[3], 0, INT64_MAX, &value)) return RedisModule_ReplyWithError(ctx, "ERR value must be an integer in 0..9223372036854775807");
    if (argc == 6) {
        size_t olen;
        const char *opt = RedisModule_StringPtrLen(argv[4], &olen);
        if (olen != 5 || strncasecmp(opt, "LIMIT", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
        RedisModuleKey *lk;
        uint64_t limit;
        if (seq_open(ctx, argv[5], REDISMODULE_READ, &lk, &limit) < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
        RedisModule_CloseKey(lk);
        if ((uint64_t)value > limit) value = (long long)limit;
    }
    RedisModuleKey *k;
    seq_map *m;
    int found = map_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &m);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    uint64_t h = fnv1a(f, n), v = 0;
    map_slot *s = m ? map_find(m, f, n, h) : NULL;
    if (s && s->hash) v = s->value;
    if ((uint64_t)value > v) {
        if (!m) m = map_new();
        if (!s || !s->hash) s = map_upsert(m, f, n);
        s->value = v = (uint64_t)value;
        map_changed(ctx, argv[1], k, m, found, "seq.hadvance");
    } else {
        RedisModule_CloseKey(k);
    }
    return RedisModule_ReplyWithLongLong(ctx, (long long)v);
}

static int seq_hset(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4 || argc % 2) return RedisModule_WrongArity(ctx);
    for (int i = 2; i < argc; i += 2) { /* all checked before anything is written */
        size_t n;
        long long v;
        if (!field_arg(argv[i], &n)) return RedisModule_ReplyWithError(ctx, "ERR field must be 1..256 bytes");
        if (!int_arg(argv[i + 1], 0, INT64_MAX, &v)) return RedisModule_ReplyWithError(ctx, "ERR value must be an integer in 0..9223372036854775807");
    }
    RedisModuleKey *k;
    seq_map *m;
    int found = map_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &k, &m);
    if (found < 0) return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    if (!m) m = map_new();
    int changed = !found;
    for (int i = 2; i < argc; i += 2) {
        size_t n;
        long long v = 0;
        const char *f = field_arg(argv[i], &n);
        int_arg(argv[i + 1], 0, INT64_MAX, &v);
        map_slot *s = map_upsert(m, f, n);
        if (s->value != (uint64_t)v) changed = 1;
        s->value = (uint64_t)v;
    }
    if (changed) map_changed(ctx, argv[1], k, m, found, "seq.hset");
    else RedisModule_CloseKey(k);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static void *map_rdb_load(RedisModuleIO *rdb, int encver) {
    if (encver != 1) return NULL;
    uint64_t used = RedisModule_LoadUnsigned(rdb);
    seq_map *m = map_new();
    for (uint64_t i = 0; i < used; i++) {
        size_t n;
        char *f = RedisModule_LoadStringBuffer(rdb, &n);
        uint64_t v = RedisModule_LoadUnsigned(rdb);
        if (n < 1 || n > FIELD_MAX || v > SEQ_MAX) {
            RedisModule_Free(f);
            map_free(m);
            return NULL;
        }
        map_upsert(m, f, n)->value = v;
        RedisModule_Free(f);
    }
    return m;
}

static void map_rdb_save(RedisModuleIO *rdb, void *value) {
    seq_map *m = value;
    RedisModule_SaveUnsigned(rdb, m->used);
    for (size_t i = 0; i < m->cap; i++) {
        map_slot *s = &m->slots[i];
        if (!s->hash) continue;
        RedisModule_SaveStringBuffer(rdb, (const char *)s->field + 2, (size_t)(s->field[0] | s->field[1] << 8));
        RedisModule_SaveUnsigned(rdb, s->value);
    }
}

static void map_aof_rewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    seq_map *m = value;
    for (size_t i = 0; i < m->cap; i++) {
        map_slot *s = &m->slots[i];
        if (!s->hash) continue;
        RedisModule_EmitAOF(aof, "floor.seq.hset", "sbl", key, (const char *)s->field + 2,
                            (size_t)(s->field[0] | s->field[1] << 8), (long long)s->value);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Public message IDs: 14 bytes = check(2) || msgid(10) || type || direction, base64url, 19 chars. */

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static int8_t B64_VAL[256];

static void b64_14(const uint8_t b[14], char out[19]) {
    for (int g = 0; g < 4; g++) {
        uint32_t x = ((uint32_t)b[3 * g] << 16) | ((uint32_t)b[3 * g + 1] << 8) | b[3 * g + 2];
        out[4 * g] = B64[x >> 18];
        out[4 * g + 1] = B64[(x >> 12) & 63];
        out[4 * g + 2] = B64[(x >> 6) & 63];
        out[4 * g + 3] = B64[x & 63];
    }
    uint32_t x = ((uint32_t)b[12] << 8) | b[13];
    out[16] = B64[x >> 10];
    out[17] = B64[(x >> 4) & 63];
    out[18] = B64[(x & 15) << 2];
}

/* Canonical only: 19 symbols, and the 2 spare bits of the last one zero. */
static int unb64_14(const char *s, size_t len, uint8_t b[14]) {
    if (len != 19) return 0;
    int bad = 0;
    for (int g = 0; g < 4; g++) {
        int a = B64_VAL[(unsigned char)s[4 * g]], c = B64_VAL[(unsigned char)s[4 * g + 1]];
        int d = B64_VAL[(unsigned char)s[4 * g + 2]], e = B64_VAL[(unsigned char)s[4 * g + 3]];
        bad |= a | c | d | e;
        uint32_t x = ((uint32_t)(a & 63) << 18) | ((uint32_t)(c & 63) << 12) | ((uint32_t)(d & 63) << 6) | (uint32_t)(e & 63);
        b[3 * g] = (uint8_t)(x >> 16);
        b[3 * g + 1] = (uint8_t)(x >> 8);
        b[3 * g + 2] = (uint8_t)x;
    }
    int a = B64_VAL[(unsigned char)s[16]], c = B64_VAL[(unsigned char)s[17]], d = B64_VAL[(unsigned char)s[18]];
    bad |= a | c | d;
    if (bad < 0 || (d & 3)) return 0;
    uint32_t x = ((uint32_t)a << 10) | ((uint32_t)c << 4) | ((uint32_t)d >> 2);
    b[12] = (uint8_t)(x >> 8);
    b[13] = (uint8_t)x;
    return 1;
}

/* MurmurHash2, 32-bit, little-endian word loads, seed 0x1234ABCD (the reference Java's). */
static uint32_t murmur2_12(const uint8_t p[12]) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x1234ABCDu ^ 12u;
    for (int i = 0; i < 12; i += 4) {
        uint32_t k = (uint32_t)p[i] | ((uint32_t)p[i + 1] << 8) | ((uint32_t)p[i + 2] << 16) | ((uint32_t)p[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* The payload of OPENID.ENC's arguments: msgid(10) || type || direction. */
static int openid_args(RedisModuleCtx *ctx, RedisModuleString **argv, uint8_t payload[12]) {
    size_t len;
    const char *s = RedisModule_StringPtrLen(argv[1], &len);
    uint64_t hi, lo;
    if (!msgid_parse(s, len, &hi, &lo)) return reply_msgid_error(ctx), 0;
    long long type, dir;
    if (!int_arg(argv[2], 0, 255, &type)) return RedisModule_ReplyWithError(ctx, "ERR msg_type must be an integer in 0..255"), 0;
    if (!int_arg(argv[3], 0, 255, &dir)) return RedisModule_ReplyWithError(ctx, "ERR direction must be an integer in 0..255"), 0;
    halves_to_bytes(hi, lo, payload);
    payload[10] = (uint8_t)type;
    payload[11] = (uint8_t)dir;
    return 1;
}

static int reply_openid_fields(RedisModuleCtx *ctx, const uint8_t payload[12]) {
    uint64_t hi, lo;
    bytes_to_halves(payload, &hi, &lo);
    char text[19];
    msgid_text(hi, lo, text);
    RedisModule_ReplyWithMap(ctx, 4);
    RedisModule_ReplyWithStringBuffer(ctx, "msgid", 5);
    RedisModule_ReplyWithStringBuffer(ctx, text, 19);
    FIELD(ctx, "msg_type", payload[10]);
    FIELD(ctx, "direction", payload[11]);
    FIELD(ctx, "time", halves_time(hi, lo));
    return REDISMODULE_OK;
}

static int openid_syntax_error(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR invalid open id: expected 19 characters of URL-safe base64 (A-Z a-z 0-9 - _) in canonical form");
}
static int openid_check_error(RedisModuleCtx *ctx) {
    return RedisModule_ReplyWithError(ctx, "ERR invalid open id: check does not match");
}

static int openid_enc(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    uint8_t b[14];
    if (!openid_args(ctx, argv, b + 2)) return REDISMODULE_OK;
    uint32_t h = murmur2_12(b + 2);
    b[0] = (uint8_t)(h >> 8);
    b[1] = (uint8_t)h;
    for (int i = 2; i < 14; i++) b[i] ^= b[i & 1];
    char out[19];
    b64_14(b, out);
    return RedisModule_ReplyWithStringBuffer(ctx, out, 19);
}

static int openid_dec(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *s = RedisModule_StringPtrLen(argv[1], &len);
    uint8_t b[14];
    if (!unb64_14(s, len, b)) return openid_syntax_error(ctx);
    for (int i = 2; i < 14; i++) b[i] ^= b[i & 1];
    uint32_t h = murmur2_12(b + 2);
    if (b[0] != (uint8_t)(h >> 8) || b[1] != (uint8_t)h) return openid_check_error(ctx);
    return reply_openid_fields(ctx, b + 2);
}

#ifdef FLOOR_HAVE_AESNI
/* Keyed format: subkeys perm = AES_k("imid.openid.perm"), mac = AES_k("imid.openid.mac\0"); a
 * 10-round balanced Feistel network over 2x6 bytes, round function = the first 6 bytes of
 * AES_perm(round || half || 0...); check = the first 2 bytes of AES_mac(0xC5 || payload || 0...). */
typedef struct { __m128i rk[11]; } aes_key;
static aes_key key_perm, key_mac;

__attribute__((target("aes,sse2"))) static __m128i aes_expand_step(__m128i k, __m128i gen) {
    gen = _mm_shuffle_epi32(gen, 0xff);
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    return _mm_xor_si128(k, gen);
}

#define AES_STEP(i, rcon) ks->rk[i] = aes_expand_step(ks->rk[i - 1], _mm_aeskeygenassist_si128(ks->rk[i - 1], rcon))
__attribute__((target("aes,sse2"))) static void aes_schedule(aes_key *ks, const uint8_t key[16]) {
    ks->rk[0] = _mm_loadu_si128((const __m128i *)key);
    AES_STEP(1, 0x01); AES_STEP(2, 0x02); AES_STEP(3, 0x04); AES_STEP(4, 0x08); AES_STEP(5, 0x10);
    AES_STEP(6, 0x20); AES_STEP(7, 0x40); AES_STEP(8, 0x80); AES_STEP(9, 0x1b); AES_STEP(10, 0x36);
}

__attribute__((target("aes,sse2"))) static void aes_block(const aes_key *ks, const uint8_t in[16], uint8_t out[16]) {
    __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i *)in), ks->rk[0]);
    for (int i = 1; i < 10; i++) b = _mm_aesenc_si128(b, ks->rk[i]);
    _mm_storeu_si128((__m128i *)out, _mm_aesenclast_si128(b, ks->rk[10]));
}

static void keyed_init(const uint8_t key[16]) {
    aes_key master;
    uint8_t sub[16];
    aes_schedule(&master, key);
    aes_block(&master, (const uint8_t *)"imid.openid.perm", sub);
    aes_schedule(&key_perm, sub);
    static const uint8_t mac_label[16] = "imid.openid.mac"; /* the 16th byte is the NUL */
    aes_block(&master, mac_label, sub);
    aes_schedule(&key_mac, sub);
}

static void feistel_round(uint8_t round, const uint8_t half[6], uint8_t f[6]) {
    uint8_t in[16] = {0}, out[16];
    in[0] = round;
    memcpy(in + 1, half, 6);
    aes_block(&key_perm, in, out);
    memcpy(f, out, 6);
}

static void keyed_check(const uint8_t payload[12], uint8_t check[2]) {
    uint8_t in[16] = {0}, out[16];
    in[0] = 0xC5;
    memcpy(in + 1, payload, 12);
    aes_block(&key_mac, in, out);
    check[0] = out[0];
    check[1] = out[1];
}

static int openid_enck(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    uint8_t payload[12], b[14], f[6];
    if (!openid_args(ctx, argv, payload)) return REDISMODULE_OK;
    keyed_check(payload, b);
    uint8_t *l = b + 2, *r = b + 8;
    memcpy(b + 2, payload, 12);
    for (uint8_t i = 0; i < 10; i++) {
        uint8_t next_r[6];
        feistel_round(i, r, f);
        for (int j = 0; j < 6; j++) next_r[j] = l[j] ^ f[j];
        memcpy(l, r, 6);
        memcpy(r, next_r, 6);
    }
    char out[19];
    b64_14(b, out);
    return RedisModule_ReplyWithStringBuffer(ctx, out, 19);
}

static int openid_deck(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *s = RedisModule_StringPtrLen(argv[1], &len);
    uint8_t b[14], f[6], check[2];
    if (!unb64_14(s, len, b)) return openid_syntax_error(ctx);
    uint8_t *l = b + 2, *r = b + 8;
    for (int i = 9; i >= 0; i--) {
        uint8_t prev_l[6];
        feistel_round((uint8_t)i, l, f);
        for (int j = 0; j < 6; j++) prev_l[j] = r[j] ^ f[j];
        memcpy(r, l, 6);
        memcpy(l, prev_l, 6);
    }
    keyed_check(b + 2, check);
    if (check[0] != b[0] || check[1] != b[1]) return openid_check_error(ctx);
    return reply_openid_fields(ctx, b + 2);
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* 64-bit IDs: 41-bit time since 2026-01-01 (ms), 10-bit node (0 standalone), 12-bit seq.       */

#define UID_EPOCH 1767225600000ULL
#define UID_MAX_TIME ((1ULL << 41) - 1)
static uint64_t uid_last = 0;
static uint32_t uid_seq = 0;

/* The next UID into *id, or 0 when the 41-bit time field is exhausted. */
static int uid_next(uint64_t now, uint64_t *id) {
    uint64_t t = now > UID_EPOCH ? now - UID_EPOCH : 0;
    uint64_t last = uid_last, seq = uid_seq;
    if (t > last) { last = t; seq = 0; }
    else if (++seq == 4096) { last++; seq = 0; }
    if (last > UID_MAX_TIME) return 0;
    uid_last = last;
    uid_seq = (uint32_t)seq;
    *id = (last << 22) | seq; /* node 0 */
    return 1;
}

static int uid_gen(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long count = 0; /* 0: one ID as an integer; n: an array of n */
    if (argc == 4) {
        size_t olen;
        const char *opt = RedisModule_StringPtrLen(argv[2], &olen);
        if (olen != 5 || strncasecmp(opt, "COUNT", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
        if (!int_arg(argv[3], 1, 10000, &count)) return RedisModule_ReplyWithError(ctx, "ERR COUNT must be an integer in 1..10000");
    } else if (argc != 2) {
        return argc < 2 ? RedisModule_WrongArity(ctx) : RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
    uint64_t now = now_ms(), id = 0;
    if (count == 0) {
        if (!uid_next(now, &id)) return RedisModule_ReplyWithError(ctx, "ERR uid time field exhausted");
        return RedisModule_ReplyWithLongLong(ctx, (long long)id);
    }
    /* Checked before the reply starts: the last ID of the block is the one that may not fit. */
    if (uid_last + 1 + (uint64_t)count / 4096 > UID_MAX_TIME) return RedisModule_ReplyWithError(ctx, "ERR uid time field exhausted");
    RedisModule_ReplyWithArray(ctx, count);
    for (long long i = 0; i < count; i++) {
        uid_next(now, &id);
        RedisModule_ReplyWithLongLong(ctx, (long long)id);
    }
    return REDISMODULE_OK;
}

static int uid_decode(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    long long uid;
    if (!int_arg(argv[1], 0, INT64_MAX, &uid)) return RedisModule_ReplyWithError(ctx, "ERR uid must be an integer in 0..9223372036854775807");
    RedisModule_ReplyWithMap(ctx, 3);
    FIELD(ctx, "time", ((uint64_t)uid >> 22) + UID_EPOCH);
    FIELD(ctx, "node", ((uint64_t)uid >> 12) & 1023);
    FIELD(ctx, "seq", (uint64_t)uid & 4095);
    return REDISMODULE_OK;
}

static int uid_encode(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long t, node, seq;
    if (!int_arg(argv[1], (long long)UID_EPOCH, (long long)(UID_EPOCH + UID_MAX_TIME), &t)) return RedisModule_ReplyWithError(ctx, "ERR time_ms out of the layout's range");
    if (!int_arg(argv[2], 0, 1023, &node)) return RedisModule_ReplyWithError(ctx, "ERR node must be an integer in 0..1023");
    if (!int_arg(argv[3], 0, 4095, &seq)) return RedisModule_ReplyWithError(ctx, "ERR seq must be an integer in 0..4095");
    return RedisModule_ReplyWithLongLong(ctx, (long long)((((uint64_t)t - UID_EPOCH) << 22) | ((uint64_t)node << 12) | (uint64_t)seq));
}

/* ------------------------------------------------------------------------------------------ */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* IM.SEND's inbox write two ways (server-bench/send.py --zadd): the key API, as IM.SEND writes,
 * and RedisModule_Call, as a module could instead. Both add `member` at `score` to `key`,
 * signal it and reply the number added; neither replicates (IM.SEND replicates one command of
 * its own). */

static int zadd_api(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    double score;
    if (RedisModule_StringToDouble(argv[2], &score) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR score is not a double");
    RedisModuleKey *k = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int t = RedisModule_KeyType(k);
    if (t != REDISMODULE_KEYTYPE_EMPTY && t != REDISMODULE_KEYTYPE_ZSET) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, ERR_WRONGTYPE);
    }
    int flags = 0;
    RedisModule_ZsetAdd(k, score, argv[3], &flags);
    RedisModule_CloseKey(k);
    if (flags & REDISMODULE_ZADD_ADDED) {
        RedisModule_SignalModifiedKey(ctx, argv[1]);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_ZSET, "zadd", argv[1]);
    }
    return RedisModule_ReplyWithLongLong(ctx, (flags & REDISMODULE_ZADD_ADDED) != 0);
}

static int zadd_call(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    RedisModuleCallReply *r = RedisModule_Call(ctx, "ZADD", "sss", argv[1], argv[2], argv[3]);
    if (!r) return RedisModule_ReplyWithError(ctx, "ERR ZADD failed");
    long long added = RedisModule_CallReplyInteger(r);
    RedisModule_FreeCallReply(r);
    return RedisModule_ReplyWithLongLong(ctx, added);
}

#define CMD(name, fn, flags, first, last)                                                        \
    if (RedisModule_CreateCommand(ctx, name, fn, flags, first, last, (first) ? 1 : 0) == REDISMODULE_ERR) \
        return REDISMODULE_ERR;

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "imidfloor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    uint8_t key[16];
    for (int i = 0; i < 16; i++) key[i] = (uint8_t)i;
    if (argc >= 1) {
        size_t len;
        const char *hex = RedisModule_StringPtrLen(argv[0], &len);
        if (len != 32) return REDISMODULE_ERR;
        for (int i = 0; i < 16; i++) {
            int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
            if (hi < 0 || lo < 0) return REDISMODULE_ERR;
            key[i] = (uint8_t)(hi * 16 + lo);
        }
    }
    memset(B32_VAL, -1, sizeof B32_VAL);
    for (int i = 0; i < 32; i++) B32_VAL[(unsigned char)B32[i]] = (int8_t)i;
    memset(B64_VAL, -1, sizeof B64_VAL);
    for (int i = 0; i < 64; i++) B64_VAL[(unsigned char)B64[i]] = (int8_t)i;

    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = seq_rdb_load,
        .rdb_save = seq_rdb_save,
        .aof_rewrite = seq_aof_rewrite,
        .free = seq_free,
    };
    SeqType = RedisModule_CreateDataType(ctx, "imidfloor", 1, &tm);
    if (!SeqType) return REDISMODULE_ERR;
    RedisModuleTypeMethods mm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = map_rdb_load,
        .rdb_save = map_rdb_save,
        .aof_rewrite = map_aof_rewrite,
        .free = map_free,
    };
    MapType = RedisModule_CreateDataType(ctx, "imidflmap", 1, &mm);
    if (!MapType) return REDISMODULE_ERR;
    RedisModuleTypeMethods im = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = idmp_rdb_load,
        .rdb_save = idmp_rdb_save,
        .aof_rewrite = seq_aof_rewrite_idmp,
        .free = idmp_free,
    };
    IdmpType = RedisModule_CreateDataType(ctx, "imidflidp", 1, &im);
    if (!IdmpType) return REDISMODULE_ERR;

    CMD("floor.noop", noop, "readonly fast", 0, 0);
    CMD("floor.msgid.gen", msgid_gen, "write fast", 2, 2);
    CMD("floor.msgid.encode", msgid_encode, "readonly fast", 0, 0);
    CMD("floor.msgid.decode", msgid_decode, "readonly fast", 0, 0);
    CMD("floor.msgid.hash", msgid_hash, "readonly fast", 0, 0);
    CMD("floor.msgid.floor", msgid_floor, "write fast", 0, 0);
    CMD("floor.seq.next", seq_next, "write deny-oom fast", 1, 1);
    CMD("floor.seq.get", seq_get, "readonly fast", 1, 1);
    CMD("floor.seq.mget", seq_mget, "readonly fast", 1, -1);
    CMD("floor.seq.set", seq_set, "write deny-oom fast", 1, 1);
    CMD("floor.seq.advance", seq_advance, "write deny-oom fast", 1, 1);
    CMD("floor.seq.hnext", seq_hnext, "write deny-oom fast", 1, 1);
    CMD("floor.seq.hget", seq_hget, "readonly fast", 1, 1);
    CMD("floor.seq.hset", seq_hset, "write deny-oom", 1, 1);
    /* Declares key 1 only: the LIMIT key (the sixth argument, when given) would need key specs,
     * which cost nothing per call. */
    CMD("floor.seq.hadvance", seq_hadvance, "write deny-oom fast", 1, 1);
    CMD("floor.openid.enc", openid_enc, "readonly fast", 0, 0);
    CMD("floor.openid.dec", openid_dec, "readonly fast", 0, 0);
#ifdef FLOOR_HAVE_AESNI
    if (__builtin_cpu_supports("aes")) {
        keyed_init(key);
        CMD("floor.openid.enck", openid_enck, "readonly fast", 0, 0);
        CMD("floor.openid.deck", openid_deck, "readonly fast", 0, 0);
    }
#endif
    CMD("floor.uid.gen", uid_gen, "write fast", 1, 1);
    CMD("floor.uid.decode", uid_decode, "readonly fast", 0, 0);
    CMD("floor.uid.encode", uid_encode, "readonly fast", 0, 0);
    CMD("floor.zadd.api", zadd_api, "write deny-oom fast", 1, 1);
    CMD("floor.zadd.call", zadd_call, "write deny-oom fast", 1, 1);
    return REDISMODULE_OK;
}
