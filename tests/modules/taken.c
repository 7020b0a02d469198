/* A module that holds names imid needs, for tests/it/failed_load.rs: loaded before imid, it makes
 * one step of imid's load fail as a real clash with another module would.
 *
 *   --loadmodule taken.so [name ...]
 *
 * Each name becomes a command of this module (replying +TAKEN), except the word `type`, which
 * creates a data type named imidseq01 (imid's). Built by the test with gcc against the
 * redismodule.h of the redis-module crate. */
#include "redismodule.h"
#include <strings.h>

static int Taken(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    return RedisModule_ReplyWithSimpleString(ctx, "TAKEN");
}

static void *Load(RedisModuleIO *rdb, int encver) {
    (void)encver;
    return (void *)(unsigned long)RedisModule_LoadUnsigned(rdb);
}

static void Save(RedisModuleIO *rdb, void *value) {
    RedisModule_SaveUnsigned(rdb, (unsigned long)value);
}

static void Free(void *value) { (void)value; }

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "taken", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    for (int i = 0; i < argc; i++) {
        const char *name = RedisModule_StringPtrLen(argv[i], NULL);
        if (!strcasecmp(name, "type")) {
            RedisModuleTypeMethods tm = {.version = 1, .rdb_load = Load, .rdb_save = Save, .free = Free};
            if (RedisModule_CreateDataType(ctx, "imidseq01", 1, &tm) == NULL) return REDISMODULE_ERR;
        } else if (RedisModule_CreateCommand(ctx, name, Taken, "readonly", 0, 0, 0) == REDISMODULE_ERR) {
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}
